# lazyblk — top-level build.  `make` builds build/lazyblk; `make test` runs every test;
# `make test SAN=1` runs them under ASan+UBSan; `make run` runs the built-in sample;
# `make install PREFIX=... [DESTDIR=...]` installs the binary, its man pages and completion;
# `make fuzz [FUZZ_SECONDS=N]` runs the fuzz targets (fuzz/README.md).
CC      ?= gcc
OBJCOPY ?= objcopy
SAN     ?= 0
# libcurl and libarchive are loaded at first use (common/dl.h): headers only for the binary.
PKGS    := liburing libzstd libcrypto json-c zlib liblzma liblz4 libseccomp libxxhash
DL_PKGS := libcurl libarchive

ifeq ($(SAN),1)
BUILD   ?= build/san
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
else
BUILD   ?= build
SANFLAGS :=
endif

# Recursive (=) so pkg-config runs after `deps` has installed what is missing.
PKG_CFLAGS = $(shell pkg-config --cflags $(PKGS) $(DL_PKGS))
PKG_LIBS   = $(shell pkg-config --libs $(PKGS)) -ldl
# The binary links these statically, with packed relative relocations: every shared object
# costs its mapping and relocation at each exec, and `lazyblk run` counts its start-up in
# milliseconds (bench/vmm.sh). Tests link them dynamically.
BIN_LIBS   = -Wl,-z,pack-relative-relocs -Wl,-Bstatic $(shell pkg-config --libs $(PKGS)) \
	     -Wl,-Bdynamic -ldl
# unit tests call libarchive directly to build their inputs
TEST_LIBS  = $(shell pkg-config --libs $(DL_PKGS))
CFLAGS  += -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread -MMD -MP $(SANFLAGS)
LDFLAGS += -pthread $(SANFLAGS)

# a module's sources are its folder's *.c and its subfolders' (blkd/engine/, cas/import/,
# vmm-glue/initramfs/, ...: one level down)
MODULES := common cas vmsnap layout ext4gen blkd vmm-glue
# the initramfs's built-in files, assembled (see "the initramfs's built-in files" below)
INITRAMFS_DIR := vmm-glue/initramfs
INITRAMFS_GEN := $(BUILD)/gen/initramfs
INITRAMFS_SH := $(INITRAMFS_DIR)/init.sh $(INITRAMFS_DIR)/stage2.sh
INITRAMFS_HELPERS := $(INITRAMFS_GEN)/lazyblk-outb $(INITRAMFS_GEN)/lazyblk-exec
INITRAMFS_EMBED := $(BUILD)/obj/$(INITRAMFS_DIR)/embed.o
LIB_SRCS := $(foreach m,$(MODULES),$(wildcard $(m)/*.c $(m)/*/*.c))
CLI_SRCS := $(wildcard cli/*.c)
UNIT_SRCS := $(wildcard tests/unit/*/test_*.c)

LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(INITRAMFS_EMBED)
CLI_OBJS := $(CLI_SRCS:%.c=$(BUILD)/obj/%.o)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(BUILD)/tests/%)

# tests/tools/linkem: a loopback link emulator (docs/linkem.md), standalone, no library code
LINKEM := $(BUILD)/tools/linkem

.PHONY: all deps test unit integration run clean bench bench-cold check-sh check-lib man \
	install uninstall fuzz fuzz-smoke fuzz-build
all: $(BUILD)/lazyblk $(LINKEM)

deps:
	@scripts/deps.sh

$(BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -c $< -o $@

$(BUILD)/liblazyblk.a: $(LIB_OBJS)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/lazyblk: $(CLI_OBJS) $(BUILD)/liblazyblk.a
	$(CC) $(LDFLAGS) -o $@ $(CLI_OBJS) $(BUILD)/liblazyblk.a $(BIN_LIBS)

# test_nbd counts the engine's lookups of the overlay and the layout behind one request
$(BUILD)/tests/blkd/test_nbd: TEST_LIBS += -Wl,--wrap=overlay_run,--wrap=overlay_state \
	-Wl,--wrap=layout_data_run_at,--wrap=layout_meta_run_at

$(BUILD)/tests/%: tests/unit/%.c $(BUILD)/liblazyblk.a | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/liblazyblk.a $(LDFLAGS) $(PKG_LIBS) $(TEST_LIBS) -lcmocka

unit: $(UNIT_BINS)
	@tests/run-unit.sh $(UNIT_BINS)

integration: $(BUILD)/lazyblk
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) tests/run-integration.sh

test: check-sh check-lib $(BUILD)/lazyblk $(UNIT_BINS) fuzz-smoke
	@tests/run-unit.sh $(UNIT_BINS)
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) tests/run-integration.sh

run: $(BUILD)/lazyblk
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) scripts/run-sample.sh

bench: $(BUILD)/lazyblk $(LINKEM)
	@LINKEM=$(abspath $(LINKEM)) bench/linkem.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/import.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/manifest.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/mkfs.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/serve.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/remote.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/images.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/vmm.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/guest.sh

# Cold start over an emulated link (not in `make bench` while build/tools/linkem is missing;
# LINK=none runs them without it): bench/coldstart.sh and bench/coldread.sh.
bench-cold: $(BUILD)/lazyblk
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/coldstart.sh
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) bench/coldread.sh

clean:
	rm -rf build

# The library's rules (docs/conventions.md): only common/log.c writes to stdout/stderr (by
# the objects' undefined symbols), no .c file over 800 lines, no function over 120.
check-lib: $(LIB_OBJS) $(CLI_OBJS)
	@scripts/check-lib.sh $(BUILD)

# ---- the initramfs's built-in files (vmm-glue/initramfs/internal.h): the guest's scripts,
# checked by shellcheck (`make check-sh`, part of `make test`), and two helpers written in
# assembly as whole tiny ELF executables (tiny_elf.h: the .text section is the file). embed.S
# puts them into the library with .incbin; as does not track those, so they are listed here.
# (INITRAMFS_* are set at the top: LIB_OBJS needs them.)
$(INITRAMFS_GEN)/lazyblk-%: $(INITRAMFS_DIR)/helper_%.S $(INITRAMFS_DIR)/tiny_elf.h
	@mkdir -p $(dir $@)
	$(CC) -c -Wa,--fatal-warnings -o $@.o $<
	$(OBJCOPY) -O binary -j .text $@.o $@
$(INITRAMFS_EMBED): $(INITRAMFS_DIR)/embed.S $(INITRAMFS_SH) $(INITRAMFS_HELPERS) | deps
	@mkdir -p $(dir $@)
	$(CC) -c -Wa,--fatal-warnings -Wa,-I$(INITRAMFS_GEN) -o $@ $<
check-sh: | deps
	shellcheck $(INITRAMFS_SH)
# ---- end of the initramfs's built-in files

# ---- the freestanding test guest for the built-in VMM (tests/guest/README.md): an ELF64 at
# physical 2 MiB with a Linux 64-bit boot protocol entry and a PVH note; no libc, no SSE.
# Built with its own flags (never the sanitizers). tests/integration/t_vmm_guest.sh finds it
# next to $(LAZYBLK): $(BUILD)/guest/testguest.elf.
GUEST := $(BUILD)/guest/testguest.elf
GUEST_SRCS := tests/guest/entry.S $(wildcard tests/guest/*.c)
GUEST_CFLAGS := -std=c11 -ffreestanding -nostdlib -static -fno-pie -no-pie -mno-red-zone \
	-mgeneral-regs-only -mcmodel=small -fno-stack-protector -fno-asynchronous-unwind-tables \
	-fno-tree-loop-distribute-patterns -O2 -g -Wall -Wextra -Werror -Wl,--build-id=none
$(GUEST): $(GUEST_SRCS) tests/guest/guest.h tests/guest/guest.ld
	@mkdir -p $(dir $@)
	$(CC) $(GUEST_CFLAGS) -T tests/guest/guest.ld -o $@ $(GUEST_SRCS)
.PHONY: guest
guest: $(GUEST)
integration test: $(GUEST)
# ---- end of the test guest

# ---- the tests that need KVM. On a host without /dev/kvm (or whose /dev/kvm is software and
# cannot run Linux, for t_run_hw and t_vm_linux) `make test` runs each in a nested QEMU (TCG)
# VM that has a real KVM (tests/integration/lib/nested.sh), but for the four that take 7
# to 20 minutes there (--long: t_confine, t_vm_snapshot, t_run_control, t_vm_travel).
# `make test-nested` runs them all nested even where /dev/kvm works (about an hour).
KVM_TESTS := t_vmm_guest t_run_cli t_run_control t_vm_snapshot t_vm_upgrade t_confine \
	t_run_hw t_vm_linux t_vm_store t_vm_travel
.PHONY: test-nested
test-nested: $(BUILD)/lazyblk $(GUEST) $(BLKSTAMP) $(CRASHSIM) $(LINKEM)
	@LAZYBLK_TEST_NESTED=1 LAZYBLK_TEST_KVM=nested LAZYBLK=$(abspath $(BUILD)/lazyblk) \
		tests/run-integration.sh $(KVM_TESTS)

# ---- the link emulator: tests/integration/t_linkem.sh and bench/linkem.sh find it next to
# $(LAZYBLK) as $(BUILD)/tools/linkem
$(LINKEM): tests/tools/linkem.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LDFLAGS) -lm
.PHONY: linkem
linkem: $(LINKEM)
integration test: $(LINKEM)

# ---- mksnap: a VM snapshot in a store without a VM (tests/tools/mksnap.c), for
# tests/integration/t_snapshot_publish.sh, found next to $(LAZYBLK) as $(BUILD)/tools/mksnap;
# linked against the library, never installed
MKSNAP := $(BUILD)/tools/mksnap
$(MKSNAP): tests/tools/mksnap.c $(BUILD)/liblazyblk.a | deps
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PKG_CFLAGS) -o $@ $< $(BUILD)/liblazyblk.a $(LDFLAGS) $(PKG_LIBS)
all integration test: $(MKSNAP)

# ---- the crash-consistency soak (docs/reliability.md): blkstamp, its writer and checker,
# and crashsim.so, the simulated host crash preloaded into the server (standalone, no
# library code, never sanitized: they test the server, which SAN=1 builds with the
# sanitizers), found next to $(LAZYBLK) in $(BUILD)/tools/. `make soak` runs SOAK_CYCLES
# kill/restart cycles per transport and crash and writes the figures into
# docs/reliability.md; `make test` runs a short one (tests/integration/t_soak.sh).
BLKSTAMP := $(BUILD)/tools/blkstamp
CRASHSIM := $(BUILD)/tools/crashsim.so
SOAK_CYCLES ?= 200
SOAK_CFLAGS := -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror -pthread
$(BLKSTAMP): tests/soak/blkstamp.c
	@mkdir -p $(dir $@)
	$(CC) $(SOAK_CFLAGS) -o $@ $<
$(CRASHSIM): tests/soak/crashsim.c
	@mkdir -p $(dir $@)
	$(CC) $(SOAK_CFLAGS) -fPIC -shared -o $@ $< -ldl
.PHONY: soak
soak: $(BUILD)/lazyblk $(BLKSTAMP) $(CRASHSIM)
	@LAZYBLK=$(abspath $(BUILD)/lazyblk) tests/soak/soak.sh $(SOAK_CYCLES) both \
		--report docs/reliability.md
all integration test: $(BLKSTAMP) $(CRASHSIM)

# ---- install: the binary, the man pages and the bash completion under $(DESTDIR)$(PREFIX),
# nothing else. The man pages are written from the binary's own --help texts
# (scripts/help2man.py: lazyblk.1 and lazyblk-CMD.1 for each subcommand), so they say what
# --help says; the completion reads the --help texts when TAB is pressed. The binary is
# installed as built (`make install` builds it first if needed; BUILD= picks the build).
PREFIX  ?= /usr/local
MANDIR  ?= $(PREFIX)/share/man
COMPDIR ?= $(PREFIX)/share/bash-completion/completions
MANGEN  ?= $(BUILD)/man
$(MANGEN)/lazyblk.1: $(BUILD)/lazyblk scripts/help2man.py
	rm -rf $(MANGEN)
	scripts/help2man.py $(BUILD)/lazyblk $(MANGEN)
man: $(MANGEN)/lazyblk.1
install: $(BUILD)/lazyblk $(MANGEN)/lazyblk.1
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(COMPDIR)
	install -m 0755 $(BUILD)/lazyblk $(DESTDIR)$(PREFIX)/bin/lazyblk
	install -m 0644 $(MANGEN)/*.1 $(DESTDIR)$(MANDIR)/man1/
	install -m 0644 scripts/lazyblk-completion.bash $(DESTDIR)$(COMPDIR)/lazyblk
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/lazyblk $(DESTDIR)$(MANDIR)/man1/lazyblk.1 \
	      $(DESTDIR)$(MANDIR)/man1/lazyblk-*.1 $(DESTDIR)$(COMPDIR)/lazyblk
# ---- end of install

# ---- fuzzing (fuzz/README.md): one libFuzzer binary per fuzz/fuzz_*.c, linked with the
# library built by clang-14 with ASan+UBSan and coverage in its own tree (build/fuzz; the VMM
# is left out: no target reaches it). `make fuzz [FUZZ_SECONDS=N]` runs each target N
# seconds from its corpus (crashes in build/fuzz/crashes/TARGET/, executions counted);
# `make fuzz-smoke` (part of `make test`) replays each target's corpus and regressions and
# fuzzes it FUZZ_SMOKE_SECONDS more.
FUZZ_CC       ?= clang-14
FUZZ_BUILD    := build/fuzz
FUZZ_SECONDS  ?= 600
FUZZ_SMOKE_SECONDS ?= 2
FUZZ_CFLAGS   := -std=c11 -D_GNU_SOURCE -O1 -g -Wall -Wextra -Werror -pthread -MMD -MP \
		 -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_SRCS     := $(wildcard fuzz/fuzz_*.c)
FUZZ_BINS     := $(FUZZ_SRCS:fuzz/%.c=$(FUZZ_BUILD)/%)
FUZZ_LIB_OBJS := $(patsubst %.c,$(FUZZ_BUILD)/obj/%.o,$(filter-out vmm-glue/%,$(LIB_SRCS)))
$(FUZZ_BUILD)/obj/%.o: %.c | deps
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link $(PKG_CFLAGS) -c $< -o $@
$(FUZZ_BUILD)/liblazyblk.a: $(FUZZ_LIB_OBJS)
	rm -f $@ && ar rcs $@ $^
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz.h $(FUZZ_BUILD)/liblazyblk.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer $(PKG_CFLAGS) -o $@ $< \
		$(FUZZ_BUILD)/liblazyblk.a $(PKG_LIBS)
fuzz-build: $(FUZZ_BINS)
fuzz: $(FUZZ_BINS)
	@scripts/fuzz.sh run $(FUZZ_SECONDS) $(FUZZ_BINS)
fuzz-smoke: $(FUZZ_BINS)
	@scripts/fuzz.sh smoke $(FUZZ_SMOKE_SECONDS) $(FUZZ_BINS)
-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_BINS:=.d)
# ---- end of fuzzing

-include $(LIB_OBJS:.o=.d) $(CLI_OBJS:.o=.d) $(LINKEM).d
