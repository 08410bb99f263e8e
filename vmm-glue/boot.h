/* SPDX-License-Identifier: MIT */
/*
 * Kernel loading and the boot-time memory contents (see README.md, "Guest-physical memory
 * map"): a bzImage (setup header, host-side payload decompression — gzip, xz, lz4 legacy,
 * zstd — with the vmlinux cached by the bzImage's sha256, or the bzImage's own 64-bit entry
 * as the fallback), a vmlinux ELF (64-bit entry, or PVH through its Xen note), the initrd,
 * the command line, boot_params (zero page) with its e820 table, the PVH start info, and
 * the GDT and identity page tables. Parsers return -errno and set *why to a static text;
 * the loaders (boot_kernel_load, boot_initrd_load) a line naming the file in a buffer. Nothing
 * here prints.
 */
#ifndef LZ_VMM_BOOT_H
#define LZ_VMM_BOOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ram.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define BOOT_GDT_ADDR 0x500u
#define BOOT_IDT_ADDR 0x520u
#define BOOT_PVH_INFO_ADDR 0x6000u   /* hvm_start_info, then its memmap and modlist */
#define BOOT_ZERO_PAGE_ADDR 0x7000u
#define BOOT_PML4_ADDR 0x9000u
#define BOOT_PDPT_ADDR 0xa000u
#define BOOT_PD_ADDR 0xb000u         /* 4 PDs: 0xb000..0xefff, 0–4 GiB in 2 MiB pages */
#define BOOT_CMDLINE_ADDR 0x20000u
#define BOOT_CMDLINE_MAX 4096u       /* including the NUL */
#define BOOT_EBDA_ADDR 0x9fc00u
#define BOOT_ACPI_ADDR 0xe0000u
#define BOOT_ACPI_MAX 0x1f000u       /* up to the VM generation ID */
#define BOOT_VMGENID_ADDR 0xff000u   /* its 16 bytes (e820 reserved), the last page below 1 MiB */
#define BOOT_HIMEM_ADDR 0x100000u    /* kernels and initrds go at or above this */
#define BOOT_MMIO_HOLE 0xc0000000ull
#define BOOT_MMIO_HOLE_END 0x100000000ull
#define BOOT_VIRTIO_BASE 0xd0000000u
#define BOOT_VIRTIO_GSI 5u
#define BOOT_VMGENID_GSI 3u          /* the GED's edge: "the VM generation ID changed" */

#define BOOT_E820_MAX 128
#define E820_RAM 1
#define E820_RESERVED 2

/* Default ceiling for a decompressed vmlinux (a decompression bomb is refused). */
#define BOOT_VMLINUX_MAX (512ull << 20)

enum boot_proto {
	BOOT_LINUX64,  /* 64-bit Linux boot protocol: long mode, RSI = boot_params */
	BOOT_PVH,      /* PVH: 32-bit protected mode, paging off, RBX = hvm_start_info */
};

struct e820_entry {
	uint64_t addr, size;
	uint32_t type;
};

/* A parsed bzImage (offsets into the file; nothing is copied). */
struct bzimage {
	uint8_t setup_sects;
	uint16_t version;
	uint8_t loadflags;
	uint16_t xloadflags;
	size_t hdr_len;          /* setup header bytes from 0x1f1 to copy into boot_params */
	size_t pm_off, pm_len;   /* the protected-mode kernel (after the setup sectors) */
	size_t payload_off, payload_len;  /* absolute in the file */
	uint32_t initrd_addr_max, cmdline_size, init_size, kernel_alignment;
	uint64_t pref_address;
};

/* What the loaded kernel needs from the rest of the boot. */
struct boot_kernel {
	enum boot_proto proto;
	uint64_t entry;          /* guest-physical */
	uint64_t lo, hi;         /* guest-physical range the kernel occupies (hi exclusive) */
	uint8_t hdr[0x80];       /* setup header bytes from 0x1f1, when hdr_len > 0 */
	size_t hdr_len;
	uint32_t initrd_addr_max, cmdline_size;
	const char *how;         /* "vmlinux ELF", "bzImage (zstd payload, cached)", ... */
};

struct boot_kernel_opts {
	enum boot_proto proto;
	/*
	 * NULL: $XDG_CACHE_HOME/lazyblk/vmlinux or ~/.cache/... (neither set: no cache). Used
	 * only if it is this user's and nobody else may write it (fs_mkdir_private: made 0700).
	 */
	const char *cache_dir;
	uint64_t vmlinux_max;    /* 0: BOOT_VMLINUX_MAX */
	bool map_segments;       /* RAM is ordinary pages: cached vmlinux segments may be mapped */
	/*
	 * boot_kernel_load's notes: the bzImage's own decompressor used (info), a cache
	 * directory not used because others may change it (warning), the vmlinux not cached
	 * (debug).
	 */
	struct note_sink notes;
};

/* bzimage.c */
int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage *bz, char *why, size_t why_len);
/*
 * The release string ("6.1.0-27-cloud-amd64 (debian-kernel@...) #1 ...") the setup header's
 * kernel_version field points to (boot protocol 2.00+): *s points into buf, *max is the
 * number of bytes of buf from there (the string is not NUL-checked). Needs only the "HdrS"
 * magic (bzimage_parse checks what booting needs). -ENOENT: no setup header (not a
 * bzImage); -ENOEXEC with *why set: a setup header without the string.
 */
int bzimage_kernel_version(const uint8_t *buf, size_t len, const char **s, size_t *max,
			   char *why, size_t why_len);
/* The compressor named by the payload's magic ("gzip", ...) or NULL. */
const char *bzimage_compression(const uint8_t *p, size_t len);
/*
 * Decompress a payload (the last 4 bytes: the uncompressed size, as Linux appends it) into
 * a malloc'ed buffer of at most limit bytes. -EPROTONOSUPPORT unknown compressor, -EFBIG
 * larger than limit, -EBADMSG corrupt.
 */
int bzimage_decompress(const uint8_t *p, size_t len, size_t limit, uint8_t **out,
		       size_t *out_len, char *why, size_t why_len);
/* Load the protected-mode kernel at its pref_address; entry = that + 0x200 (64-bit). */
int bzimage_load_pm(const uint8_t *buf, size_t len, const struct bzimage *bz,
		    const struct vm_ram *ram, struct boot_kernel *k, char *why, size_t why_len);

/* elf.c: the structures are read in host byte order (x86-64 hosts only, as the VMM). */
bool elf_is_elf(const uint8_t *buf, size_t len);
/* An ELF64 little-endian file header (magic, class, data; nothing else checked). */
bool elf_is_elf64le(const uint8_t *buf, size_t len);
/*
 * Whether an x86-64 ELF executable (any e_type) is statically linked: 1 static (no
 * PT_INTERP), 0 dynamically linked, -ENOEXEC not an x86-64 ELF64 or its program headers
 * outside the file.
 */
int elf_is_static(const uint8_t *buf, size_t len);
/*
 * The contents of the section called name (a kernel module's ".modinfo", ...): 0 with
 * *data into buf and *size, or with *data NULL and *size 0 when there is no such section;
 * -ENOEXEC not an ELF64 LE file, or its section headers, section names or that section
 * outside the file.
 */
int elf_section(const uint8_t *buf, size_t len, const char *name, const uint8_t **data,
		size_t *size);
/*
 * A vmlinux's release: *s just after the first "Linux version " banner in buf, *max the
 * bytes from there to the end of buf; -ENOENT without one.
 */
int elf_linux_version(const uint8_t *buf, size_t len, const char **s, size_t *max);
/*
 * Copy the PT_LOAD segments to their p_paddr (each wholly inside RAM at or above
 * BOOT_HIMEM_ADDR: the VMM's own pages, ACPI and the MMIO hole are refused); k->entry is the
 * 64-bit entry (e_entry, turned physical if it is a virtual address of a segment) or, for
 * BOOT_PVH, the XEN_ELFNOTE_PHYS32_ENTRY note (-ENOEXEC without one).
 */
int elf_load(const uint8_t *buf, size_t len, const struct vm_ram *ram, enum boot_proto proto,
	     struct boot_kernel *k, char *why, size_t why_len);
/*
 * elf_load, but buf is a mapping of the file open as fd, which nobody modifies in place (a
 * cache file, replaced only by rename): the page-aligned middle of each segment is mapped
 * copy-on-write into guest RAM instead of copied, so a boot reads (and shares with other VMs
 * through the page cache) only the kernel pages the guest touches. ram must be ordinary
 * pages (not hugetlb). Falls back to copying a segment whose file offset and address are
 * not congruent modulo the page size.
 */
int elf_load_mapped(const uint8_t *buf, size_t len, int fd, const struct vm_ram *ram,
		    enum boot_proto proto, struct boot_kernel *k, char *why, size_t why_len);

/* boot.c */
/*
 * Before the VM exists (no /dev/kvm needed), what the loaders would refuse first: the file
 * cannot be read, is not a kernel (boot_kernel_check), the initrd is not a non-empty regular
 * file (boot_initrd_check). 0, or -errno with the loaders' line in why.
 */
int boot_kernel_check(const char *path, char *why, size_t why_len);
int boot_initrd_check(const char *path, char *why, size_t why_len);
/*
 * Loads a bzImage or an ELF from path into ram. 0, or -errno with one line in why (why_len
 * bytes, may be 0): "kernel PATH: not a kernel (neither a bzImage nor an ELF vmlinux)".
 */
int boot_kernel_load(const char *path, const struct boot_kernel_opts *o,
		     const struct vm_ram *ram, struct boot_kernel *k, char *why, size_t why_len);
/*
 * Reads the initrd into RAM, page-aligned at the top of low RAM (below initrd_addr_max,
 * above the kernel). 0, or -errno with one line in why ("initrd PATH: ...").
 */
int boot_initrd_load(const char *path, const struct vm_ram *ram, const struct boot_kernel *k,
		     uint64_t *addr, uint64_t *size, char *why, size_t why_len);
/* The e820 map for mem_size bytes of RAM (split around the MMIO hole): entry count. */
TEST_HOOK
unsigned boot_e820_build(uint64_t mem_size, struct e820_entry *e, unsigned max);
/* append + " virtio_mmio.device=4K@0x...:GSI" per disk; -ENAMETOOLONG past max - 1. */
int boot_cmdline_build(const char *append, unsigned ndisks, char *buf, size_t max);

struct boot_layout {
	uint64_t mem_size;
	uint64_t cmdline_addr;
	size_t cmdline_len;      /* without the NUL */
	uint64_t initrd_addr, initrd_size;
	uint64_t rsdp_addr;
};
/* The zero page (4096 bytes). */
TEST_HOOK
void boot_params_build(uint8_t zp[4096], const struct boot_kernel *k,
		       const struct boot_layout *l);
/* hvm_start_info (version 1) + memmap + modlist (initrd) at gpa BOOT_PVH_INFO_ADDR into buf. */
TEST_HOOK
size_t boot_pvh_build(uint8_t *buf, size_t len, const struct boot_layout *l);
/* GDT (64-bit or 32-bit code segment per proto), IDT and, for Linux64, the page tables. */
TEST_HOOK
int boot_tables_setup(const struct vm_ram *ram, enum boot_proto proto);
/* Everything below 1 MiB the VMM writes, and the rest of the boot data, in one call. */
int boot_memory_setup(const struct vm_ram *ram, const struct boot_kernel *k,
		      const struct boot_layout *l, const char *cmdline);

#endif
