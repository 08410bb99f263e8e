#!/bin/bash
# The library's rules, checked by `make check-lib` (part of `make test`); docs/conventions.md
# says why. Lists every offender as FILE:LINE (or OBJECT: SYMBOL) and fails if there is one.
#
#   1. A silent library. No object of the library (BUILD/obj/{common,cas,vmsnap,layout,ext4gen,blkd,
#      vmm-glue}) but common/log.o refers to stdout or stderr, or to a function that writes
#      to them (printf, puts, perror, err/warn, ...), by its undefined symbols (nm -u); and no
#      library source but common/log.c names STDOUT_FILENO or STDERR_FILENO. Writing to a
#      stream or a descriptor the caller passes in (fprintf, fputs, fwrite, write on an fd
#      argument) is allowed: the caller chose where the text goes.
#   2. No .c file of a production folder (the library's and cli/) over 800 lines.
#   3. No function of a production folder over 120 lines (cli/: 80, it only parses, calls and
#      prints), from the line of its opening brace to its closing brace (kernel style: both
#      in column 0).
#   4. Test hooks (scripts/check_hooks.py): a library function that no other production
#      object calls is static, or its declaration carries TEST_HOOK (common/test_hook.h)
#      because tests/unit call it; and a TEST_HOOK function has no production caller.
#   5. Includes go down: a production file includes headers of its own module and of the
#      modules after it in LAYERS (cli, vmm-glue, blkd, ext4gen, layout, vmsnap, cas,
#      common), never
#      of one before it; and no file includes another module's internal header (*_int.h,
#      internal.h).
#   6. No file loops (scripts/check_loops.py): no two files of the library or cli/ call each
#      other, directly or around a loop (a call: an object's undefined symbol that another
#      object defines, as nm reads them; and a call through the operations tables of DISPATCH,
#      e.g. the tier chain's get into each tier: a chunk load returns to no file it left).
#   7. The engine is the disk module's: no production file outside blkd/engine/ and blkd/disk/
#      includes a header of blkd/engine/ (engine.h, reader.h, ...); every other user opens a
#      disk with disk_open() and asks the disk (blkd/disk/disk.h). No exceptions: the
#      overlay's files as files (lazyblk overlay, snapshot, commit, run --restore) are
#      blkd/overlay/, which the engine uses like they do.
#   8. One way for a reason (common/why.h): no production file takes or passes a reason as
#      `const char **...why` (it is `char *why, size_t why_len`, filled by why_set/why_first);
#      and only the files of LOG_OK, where a failure has nobody to return its reason to
#      (docs/conventions.md), call log_error or log_warn in the library.
#
# Tests (tests/) are exempt from 2 and 3, and with fuzz/ from 5, 7 and 8. usage: scripts/check-lib.sh [BUILD] (default build)
set -u
cd "$(dirname "$0")/.." || exit 2
BUILD=${1:-build}
LIB_DIRS=(common cas vmsnap layout ext4gen blkd vmm-glue)
PROD_DIRS=("${LIB_DIRS[@]}" cli)
MAX_FILE_LINES=800
MAX_FUNC_LINES=120
MAX_CLI_FUNC_LINES=80

# Symbols that write to the standard streams without being given one.
# (fprintf and vfprintf need a stream: naming stdout or stderr is what is caught.)
PRINTS='stdout|stderr|printf|vprintf|puts|putchar|perror|psignal|psiginfo'
PRINTS+='|dprintf|vdprintf|__printf_chk|__vprintf_chk'
PRINTS+='|__dprintf_chk|__vdprintf_chk|err|errx|verr|verrx|warn|warnx|vwarn|vwarnx|error'
PRINTS+='|error_at_line'
# OBJECT (relative to BUILD/obj) that may use them, with the reason. Keep it short.
ALLOW=(
	common/log.o  # the logger: the one writer of stderr
)

fail=0
say() { echo "check-lib: $*"; fail=1; }

allowed() {
	local o
	for o in "${ALLOW[@]}"; do [ "$1" = "$o" ] && return 0; done
	return 1
}

# 1. a silent library
objs=0
for d in "${LIB_DIRS[@]}"; do
	[ -d "$BUILD/obj/$d" ] || { echo "check-lib: $BUILD/obj/$d: not built (make first)"; exit 2; }
	while IFS= read -r o; do
		rel=${o#"$BUILD/obj/"}
		# an object whose source is gone (a file moved or split) is not the library
		[ -e "${rel%.o}.c" ] || [ -e "${rel%.o}.S" ] || continue
		objs=$((objs + 1))
		allowed "$rel" && continue
		syms=$(nm -u "$o" | awk '{ print $NF }' | grep -xE "$PRINTS" | tr '\n' ' ')
		[ -n "$syms" ] && say "$rel: writes to stdout/stderr: $syms(only common/log.c does;" \
			"return -errno and a reason, or log through common/log.h)"
	done < <(find "$BUILD/obj/$d" -name '*.o' | sort)
done
[ "$objs" -gt 0 ] || { echo "check-lib: no objects under $BUILD/obj"; exit 2; }
while IFS= read -r hit; do
	say "$hit: names a standard stream's descriptor (only common/log.c does)"
done < <(grep -rnE '\b(STDOUT|STDERR)_FILENO\b' --include='*.c' --include='*.h' \
	"${LIB_DIRS[@]}" | grep -v '^common/log\.c:' | cut -d: -f1,2)

# 2. and 3. sizes
mapfile -t srcs < <(find "${PROD_DIRS[@]}" -name '*.c' -o -name '*.h' | sort)
for f in "${srcs[@]}"; do
	[[ $f == *.c ]] || continue
	n=$(wc -l < "$f")
	[ "$n" -gt "$MAX_FILE_LINES" ] && say "$f:$n: $n lines (at most $MAX_FILE_LINES a file)"
done
while IFS= read -r hit; do
	say "$hit"
done < <(awk -v lib_max="$MAX_FUNC_LINES" -v cli_max="$MAX_CLI_FUNC_LINES" '
	FNR == 1 { infn = 0; max = FILENAME ~ /^cli\// ? cli_max : lib_max }
	# the last line in column 0 that can start a definition: its name is before the "("
	!infn && /^[A-Za-z_]/ && !/^(struct|union|enum|typedef)[^(]*$/ { sig = FNR; line = $0 }
	!infn && /^\{/ { infn = 1; start = FNR; next }
	infn && /^\}/ {
		infn = 0
		n = FNR - start + 1
		if (n <= max)
			next
		name = line; sub(/\(.*/, "", name); sub(/.*[ *]/, "", name)
		printf "%s:%d: %s() is %d lines (at most %d a function)\n", FILENAME, sig, name, n, max
	}' "${srcs[@]}")

# 4. test hooks
python3 scripts/check_hooks.py "$BUILD" "${LIB_DIRS[@]}" -- "${PROD_DIRS[@]}" || fail=1

# 5. includes go down the layers (blkd's folders keep their own order: blkd/README.md), and
# 7. the engine is private to the disk module: one walk of the includes checks both
LAYERS=(cli vmm-glue blkd ext4gen layout vmsnap cas common)
while IFS= read -r hit; do
	say "$hit"
done < <(python3 - "${LAYERS[@]}" <<'PY'
import os, re, sys
layers = sys.argv[1:]
rank = {m: i for i, m in enumerate(layers)}
for top in layers:
    for d, _, files in os.walk(top):
        for f in sorted(files):
            if not f.endswith((".c", ".h")):
                continue
            path = os.path.join(d, f)
            for no, line in enumerate(open(path, encoding="utf-8"), 1):
                m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
                if not m:
                    continue
                target = os.path.normpath(os.path.join(d, m.group(1)))
                # 7. the engine is private to the disk module
                if os.path.dirname(target) == "blkd/engine" and \
                        not d.startswith(("blkd/engine", "blkd/disk")):
                    print(f"{path}:{no}: includes {target}: the engine is the disk module's "
                          "(open a disk with disk_open, ask it through blkd/disk/disk.h)")
                mod = target.split(os.sep)[0]
                if mod not in rank or mod == top:
                    continue
                if rank[mod] < rank[top]:
                    print(f"{path}:{no}: includes {target}: {mod}/ is above {top}/ (includes go down: {' -> '.join(layers)})")
                base = os.path.basename(target)
                if base.endswith("_int.h") or base == "internal.h":
                    print(f"{path}:{no}: includes {target}, internal to {mod}/")
PY
)

# 6. no file loops
# Calls through an operations table count where the table is the seam a walk goes down: the
# tier chain's get (cas/tier/chain.c to each tier), the remote's backends, the disk's kinds.
# (Callbacks up to an owner — vq_runner_ops, a backend's auth hook — are not such calls.)
DISPATCH=(cas/tier/chain.c:tier_ops cas/remote/remote.c:remote_ops blkd/disk/disk.c:disk_ops)
python3 scripts/check_loops.py "${DISPATCH[@]/#/--dispatch=}" "$BUILD" "${PROD_DIRS[@]}" || fail=1

# 8. one way for a reason; the library logs a failure only where nobody can be told
# Library files that log a failure instead of returning its reason, and why they may.
LOG_OK=(
	common/log.c                  # the logger
	common/sock.c common/dl.c     # a server's listen socket, libcurl on the HTTP loop's thread
	blkd/transport/*.c            # connection threads (NBD, vhost-user, the control socket)
	blkd/engine/reader.c          # the shared chunk layers: said once, where it happens
	cas/source.c cas/tier/*.c cas/cache.c cas/remote/remote.c
	cas/remote/remote_oci.c       # its chunk fetches (locate, check), for servers and prefetch
	cas/remote/lease.c            # a lease's removal: the command goes on, the lease expires
	vmm-glue/cpu.c vmm-glue/vm_control.c # vCPU threads, the VM's control socket
)
in_list() {
	local f=$1 p
	shift
	for p in "$@"; do
		# shellcheck disable=SC2053 # a pattern on purpose (blkd/transport/*.c)
		[[ $f == $p ]] && return 0
	done
	return 1
}
while IFS=: read -r f rest; do
	say "$f:$rest: a reason as const char ** (common/why.h: char *why, size_t why_len)"
done < <(grep -rnE 'const char \*\*[a-z_]*why\b' --include='*.[ch]' "${PROD_DIRS[@]}")
while IFS=: read -r f rest; do
	in_list "$f" "${LOG_OK[@]}" || say "$f:$rest: the library logs a failure (return it: common/why.h, docs/conventions.md)"
done < <(grep -rnE '\blog_(error|warn)\(' --include='*.c' "${LIB_DIRS[@]}")

[ $fail -eq 0 ] && echo "check-lib: ok ($objs library objects, ${#srcs[@]} source files)"
exit $fail
