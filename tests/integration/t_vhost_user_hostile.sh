#!/bin/bash
# lazyblk serve --vhost-user against a hostile front-end (tests/integration/lib/vu_front.py),
# no guest needed:
#  - guest memory in a memfd not sealed against shrinking is refused with one log line (the
#    front-end then truncates it and starts a queue: a server that had mapped it would die of
#    SIGBUS), and the server goes on serving the next front-end; sealed memory is accepted,
#    cannot be truncated, and serves a request.
. "$(dirname "$0")/lib/common.sh"
. "$TESTLIB/kernel.sh"   # vu_serve, vu_stop (no kernel needed here)

FRONT=$TESTLIB/vu_front.py
truncate -s 4M "$T/disk.raw"
VU_SOCK=$T/vu.sock

# ---- guest memory that can shrink: refused, the server survives ------------------------------
vu_serve s1 --raw "$T/disk.raw" --vhost-user "$VU_SOCK"
python3 "$FRONT" unsealed "$VU_SOCK" || { cat "$T/s1.err" >&2; die "unsealed memfd"; }
kill -0 "$VU_PID" 2>/dev/null || { cat "$T/s1.err" >&2; die "the server died (SIGBUS?)"; }
n=$(grep -c "SET_MEM_TABLE refused: memory region 0: its file is not sealed against shrinking (F_SEAL_SHRINK; QEMU: memory-backend-memfd with seal=on)" "$T/s1.err" || true)
[ "$n" = 1 ] || { cat "$T/s1.err" >&2; die "unsealed memfd: $n log lines, want 1"; }
echo "ok: unsealed guest memory refused: $(grep -o 'SET_MEM_TABLE refused.*' "$T/s1.err")"
# the next front-end, with sealed memory: accepted, not truncatable, served
out=$(python3 "$FRONT" sealed "$VU_SOCK") || { cat "$T/s1.err" >&2; die "sealed memfd"; }
[ "$out" = "serial ${out#serial }" ] && [ -n "${out#serial }" ] || die "sealed: output '$out'"
echo "ok: sealed guest memory accepted, ftruncate fails with EPERM, a request served ($out)"
vu_stop "$VU_PID" s1

