/* SPDX-License-Identifier: MIT */
/*
 * Boot-time guest memory: kernel and initrd loading, the vmlinux cache, the command line,
 * boot_params (zero page) with e820, the PVH start info, GDT/IDT and identity page tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/digest_memo.h"
#include "../common/fsutil.h"
#include "../common/le.h"
#include "../common/why.h"
#include "../common/sha256.h"
#include "../common/size.h"
#include "boot.h"

/* boot_params offsets (arch/x86/include/uapi/asm/bootparam.h) */
#define BP_ACPI_RSDP 0x070
#define BP_EXT_RAMDISK_IMAGE 0x0c0
#define BP_EXT_RAMDISK_SIZE 0x0c4
#define BP_EXT_CMD_LINE_PTR 0x0c8
#define BP_E820_ENTRIES 0x1e8
#define BP_HDR 0x1f1
#define BP_BOOT_FLAG 0x1fe
#define BP_HEADER 0x202
#define BP_VERSION 0x206
#define BP_TYPE_OF_LOADER 0x210
#define BP_LOADFLAGS 0x211
#define BP_RAMDISK_IMAGE 0x218
#define BP_RAMDISK_SIZE 0x21c
#define BP_CMD_LINE_PTR 0x228
#define BP_KERNEL_ALIGNMENT 0x230
#define BP_CMDLINE_SIZE 0x238
#define BP_E820_TABLE 0x2d0
#define LOADED_HIGH 0x01

/* hvm_start_info (xen/include/public/arch-x86/hvm/start_info.h) */
#define PVH_MAGIC 0x336ec578u
#define PVH_INFO_SIZE 56
#define PVH_MODLIST_OFF 0x40
#define PVH_MEMMAP_OFF 0x60
#define PVH_MEMMAP_MAX 8

static void boot_cache_dir(const struct boot_kernel_opts *o, char *buf, size_t len)
{
	const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");

	buf[0] = '\0';
	if (o->cache_dir)
		snprintf(buf, len, "%s", o->cache_dir);
	else if (x && *x == '/')
		snprintf(buf, len, "%s/lazyblk/vmlinux", x);
	else if (home && *home == '/')
		snprintf(buf, len, "%s/.cache/lazyblk/vmlinux", home);
}

/* The vmlinux cache's files, in a directory of mode 0700 (fs_mkdir_private). */
#define BOOT_CACHE_MODE 0600

/* A vmlinux: mapped from the cache, or decompressed into memory. */
struct vmlinux {
	struct fs_map map;  /* from the cache */
	int fd;             /* the cache file (its segments may be mapped into RAM), or -1 */
	uint8_t *heap;      /* decompressed now */
	const uint8_t *data;
	size_t len;
};

static void vmlinux_release(struct vmlinux *v)
{
	fs_unmap(&v->map);
	if (v->fd >= 0)
		close(v->fd);
	free(v->heap);
	memset(v, 0, sizeof(*v));
	v->fd = -1;
}

/*
 * The decompressed vmlinux of a bzImage: from the cache (keyed by the bzImage's sha256, which
 * is itself remembered by the file's identity in DIR/digests) or decompressed now and cached.
 * *cached tells which.
 */
static int boot_vmlinux_get(const struct fs_map *img, const struct bzimage *bz,
			    const struct boot_kernel_opts *o, struct vmlinux *v, bool *cached,
			    char *why, size_t why_len)
{
	char dir[PATH_MAX - 80], memo[PATH_MAX], path[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	char dwhy[WHY_MAX] = "";
	uint8_t d[SHA256_LEN];
	int ret;

	*cached = false;
	memset(v, 0, sizeof(*v));
	v->fd = -1;
	boot_cache_dir(o, dir, sizeof(dir));
	/* a directory another user can change is not read back from (nor written to) */
	if (dir[0] && (ret = fs_mkdir_private(dir, dwhy, sizeof(dwhy)))) {
		note_emit(&o->notes, dwhy[0] ? NOTE_WARN : NOTE_DEBUG, "vmlinux cache %s not used (%s)",
			  dir, dwhy[0] ? dwhy : strerror(-ret));
		dir[0] = '\0';
	}
	if (dir[0] && (digest_memo_dir(dir, memo, sizeof(memo)) ||
		       digest_memo_sha256(memo, img, d)))
		dir[0] = '\0';
	if (dir[0]) {
		sha256_to_hex(d, hex);
		snprintf(path, sizeof(path), "%s/%s", dir, hex);
		v->fd = fs_open_regular(AT_FDCWD, path, O_NOFOLLOW, NULL);
		if (v->fd >= 0 && !fs_map_fd(v->fd, &v->map) && elf_is_elf(v->map.data, v->map.len)) {
			v->data = v->map.data;
			v->len = v->map.len;
			*cached = true;
			return 0;
		}
		vmlinux_release(v);
	}
	ret = bzimage_decompress(img->data + bz->payload_off, bz->payload_len,
				 o->vmlinux_max ? o->vmlinux_max : BOOT_VMLINUX_MAX, &v->heap,
				 &v->len, why, why_len);
	if (ret)
		return ret;
	v->data = v->heap;
	if (!elf_is_elf(v->data, v->len)) {
		vmlinux_release(v);
		why_set(why, why_len, 0, "the decompressed payload is not an ELF vmlinux");
		return -ENOEXEC;
	}
	if (dir[0] && fs_write_file_atomic(path, v->data, v->len, BOOT_CACHE_MODE))
		note_emit(&o->notes, NOTE_DEBUG, "cannot cache the vmlinux in %s", dir);
	return 0;
}

static int boot_bzimage_load(const struct fs_map *map, const struct bzimage *bz,
			     const struct boot_kernel_opts *o, const struct vm_ram *ram,
			     struct boot_kernel *k, char *why, size_t why_len)
{
	const uint8_t *img = map->data;
	size_t len = map->len;
	const char *comp = bzimage_compression(img + bz->payload_off, bz->payload_len);
	struct vmlinux vml;
	bool cached;
	int ret;

	memcpy(k->hdr, img + BP_HDR, bz->hdr_len);
	k->hdr_len = bz->hdr_len;
	k->initrd_addr_max = bz->initrd_addr_max;
	k->cmdline_size = bz->cmdline_size;
	ret = boot_vmlinux_get(map, bz, o, &vml, &cached, why, why_len);
	if (!ret) {
		ret = elf_load_mapped(vml.data, vml.len, o->map_segments ? vml.fd : -1, ram,
				      o->proto, k, why, why_len);
		vmlinux_release(&vml);
		k->how = cached ? "bzImage (vmlinux from the cache)" : "bzImage (payload decompressed)";
		return ret;
	}
	if (o->proto == BOOT_PVH)
		return ret;
	/* fall back to the kernel's own decompressor, entered through its 64-bit entry */
	note_emit(&o->notes, NOTE_INFO, "%s payload: %s: using the bzImage's own decompressor "
		  "(slow under software KVM)", comp ? comp : "unknown", why);
	k->proto = BOOT_LINUX64;
	k->how = "bzImage (64-bit entry, in-guest decompression)";
	return bzimage_load_pm(img, len, bz, ram, k, why, why_len);
}

#define BOOT_NOT_KERNEL "not a kernel (neither a bzImage nor an ELF vmlinux)"

/* An ELF, or what has the boot protocol's "HdrS" (a bzImage, perhaps a broken one). */
static bool boot_looks_like_kernel(const uint8_t *img, size_t len)
{
	return elf_is_elf(img, len) || (len >= 0x206 && !memcmp(img + 0x202, "HdrS", 4));
}

int boot_kernel_check(const char *path, char *why, size_t why_len)
{
	struct fs_map map;
	int ret = fs_map_file(path, &map);

	if (ret)
		return why_set(why, why_len, ret, "kernel %s: %s", path, fs_open_why(ret));
	if (!boot_looks_like_kernel(map.data, map.len))
		ret = why_set(why, why_len, -ENOEXEC, "kernel %s: " BOOT_NOT_KERNEL, path);
	fs_unmap(&map);
	return ret;
}

int boot_kernel_load(const char *path, const struct boot_kernel_opts *o,
		     const struct vm_ram *ram, struct boot_kernel *k, char *why, size_t why_len)
{
	struct bzimage bz;
	char msg[WHY_MAX] = "unknown error", bz_why[WHY_MAX] = "";
	struct fs_map map;
	const uint8_t *img;
	size_t len;
	int ret;

	memset(k, 0, sizeof(*k));
	k->proto = o->proto;
	ret = fs_map_file(path, &map);
	if (ret)
		return why_set(why, why_len, ret, "kernel %s: %s", path, fs_open_why(ret));
	img = map.data;
	len = map.len;
	if (elf_is_elf(img, len)) {
		ret = elf_load(img, len, ram, o->proto, k, msg, sizeof(msg));
		k->how = "ELF";
	} else {
		ret = bzimage_parse(img, len, &bz, bz_why, sizeof(bz_why));
		if (ret && !boot_looks_like_kernel(img, len)) {
			ret = why_set(msg, sizeof(msg), -ENOEXEC, BOOT_NOT_KERNEL);
		} else if (ret) {
			why_set(msg, sizeof(msg), ret, "%s", bz_why);
		} else {
			ret = boot_bzimage_load(&map, &bz, o, ram, k, msg, sizeof(msg));
		}
	}
	fs_unmap(&map);
	if (ret)
		why_set(why, why_len, ret, "kernel %s: %s", path, msg);
	return ret;
}

static uint64_t boot_low_ram_end(const struct vm_ram *ram)
{
	for (unsigned i = 0; i < ram->nslots; i++)
		if (ram->slot[i].gpa == 0)
			return ram->slot[i].size;
	return 0;
}

/* The initrd opened: a non-empty regular file. The fd, or -errno with one line in why. */
static int boot_initrd_open(const char *path, struct stat *st, char *why, size_t why_len)
{
	int fd = fs_open_regular(AT_FDCWD, path, 0, st); /* a FIFO, a device: never opened */

	if (fd < 0 && fd != -EINVAL && fd != -EISDIR)
		return why_set(why, why_len, fd, "initrd %s: %s", path, strerror(-fd));
	if (fd < 0 || !st->st_size) {
		if (fd >= 0)
			close(fd);
		return why_set(why, why_len, -EINVAL, "initrd %s: not a non-empty regular file",
			       path);
	}
	return fd;
}

int boot_initrd_check(const char *path, char *why, size_t why_len)
{
	struct stat st;
	int fd = boot_initrd_open(path, &st, why, why_len);

	if (fd < 0)
		return fd;
	close(fd);
	return 0;
}

int boot_initrd_load(const char *path, const struct vm_ram *ram, const struct boot_kernel *k,
		     uint64_t *addr, uint64_t *size, char *why, size_t why_len)
{
	uint64_t top = boot_low_ram_end(ram), max = k->initrd_addr_max;
	char h[32];
	struct stat st;
	uint8_t *dst;
	int fd = boot_initrd_open(path, &st, why, why_len), ret;

	if (fd < 0)
		return fd;
	if (!max)
		max = 0x37ffffff; /* the boot protocol's default */
	if (top > max + 1ull)
		top = max + 1ull;
	if ((uint64_t)st.st_size > top || ((top - st.st_size) & ~0xfffull) < k->hi ||
	    ((top - st.st_size) & ~0xfffull) < BOOT_HIMEM_ADDR) {
		close(fd);
		return why_set(why, why_len, -ENOSPC, "initrd %s: %s do not fit in guest RAM next "
			       "to the kernel (more --mem)", path,
			       size_human((uint64_t)st.st_size, h, sizeof(h)));
	}
	*addr = (top - st.st_size) & ~0xfffull;
	*size = st.st_size;
	dst = vm_ram_ptr(ram, *addr, *size);
	ret = dst ? fs_pread_full(fd, dst, *size, 0) : -EFAULT;
	close(fd);
	if (ret)
		why_set(why, why_len, ret, "initrd %s: %s", path, strerror(-ret));
	return ret;
}

static unsigned e820_add(struct e820_entry *e, unsigned n, unsigned max, uint64_t addr,
			 uint64_t size, uint32_t type)
{
	if (n < max && size) {
		e[n].addr = addr;
		e[n].size = size;
		e[n].type = type;
		n++;
	}
	return n;
}

unsigned boot_e820_build(uint64_t mem_size, struct e820_entry *e, unsigned max)
{
	uint64_t lo = mem_size < BOOT_MMIO_HOLE ? mem_size : BOOT_MMIO_HOLE;
	unsigned n = 0;

	n = e820_add(e, n, max, 0, BOOT_EBDA_ADDR, E820_RAM);
	n = e820_add(e, n, max, BOOT_EBDA_ADDR, BOOT_HIMEM_ADDR - BOOT_EBDA_ADDR, E820_RESERVED);
	if (lo > BOOT_HIMEM_ADDR)
		n = e820_add(e, n, max, BOOT_HIMEM_ADDR, lo - BOOT_HIMEM_ADDR, E820_RAM);
	n = e820_add(e, n, max, BOOT_MMIO_HOLE, BOOT_MMIO_HOLE_END - BOOT_MMIO_HOLE,
		     E820_RESERVED);
	if (mem_size > lo)
		n = e820_add(e, n, max, BOOT_MMIO_HOLE_END, mem_size - lo, E820_RAM);
	return n;
}

int boot_cmdline_build(const char *append, unsigned ndisks, char *buf, size_t max)
{
	size_t n = 0;
	int w;

	if (!max)
		return -ENAMETOOLONG;
	w = snprintf(buf, max, "%s", append ? append : "");
	if (w < 0 || (size_t)w >= max)
		return -ENAMETOOLONG;
	n = (size_t)w;
	for (unsigned i = 0; i < ndisks; i++) {
		w = snprintf(buf + n, max - n, "%svirtio_mmio.device=4K@0x%x:%u", n ? " " : "",
			     BOOT_VIRTIO_BASE + i * 0x1000u, BOOT_VIRTIO_GSI + i);
		if (w < 0 || (size_t)w >= max - n)
			return -ENAMETOOLONG;
		n += (size_t)w;
	}
	return 0;
}

void boot_params_build(uint8_t zp[4096], const struct boot_kernel *k,
		       const struct boot_layout *l)
{
	struct e820_entry e[BOOT_E820_MAX];
	unsigned n;

	memset(zp, 0, 4096);
	if (k->hdr_len) {
		memcpy(zp + BP_HDR, k->hdr, k->hdr_len);
	} else {
		le16_put(zp + BP_BOOT_FLAG, 0xaa55);
		memcpy(zp + BP_HEADER, "HdrS", 4);
		le16_put(zp + BP_VERSION, 0x020c);
		le32_put(zp + BP_KERNEL_ALIGNMENT, 0x1000000);
		le32_put(zp + BP_CMDLINE_SIZE, BOOT_CMDLINE_MAX - 1);
	}
	zp[BP_TYPE_OF_LOADER] = 0xff;
	zp[BP_LOADFLAGS] |= LOADED_HIGH;
	le32_put(zp + BP_CMD_LINE_PTR, (uint32_t)l->cmdline_addr);
	le32_put(zp + BP_EXT_CMD_LINE_PTR, (uint32_t)(l->cmdline_addr >> 32));
	le32_put(zp + BP_RAMDISK_IMAGE, (uint32_t)l->initrd_addr);
	le32_put(zp + BP_EXT_RAMDISK_IMAGE, (uint32_t)(l->initrd_addr >> 32));
	le32_put(zp + BP_RAMDISK_SIZE, (uint32_t)l->initrd_size);
	le32_put(zp + BP_EXT_RAMDISK_SIZE, (uint32_t)(l->initrd_size >> 32));
	le64_put(zp + BP_ACPI_RSDP, l->rsdp_addr);
	n = boot_e820_build(l->mem_size, e, BOOT_E820_MAX);
	zp[BP_E820_ENTRIES] = (uint8_t)n;
	for (unsigned i = 0; i < n; i++) {
		le64_put(zp + BP_E820_TABLE + 20 * i, e[i].addr);
		le64_put(zp + BP_E820_TABLE + 20 * i + 8, e[i].size);
		le32_put(zp + BP_E820_TABLE + 20 * i + 16, e[i].type);
	}
}

size_t boot_pvh_build(uint8_t *buf, size_t len, const struct boot_layout *l)
{
	struct e820_entry e[PVH_MEMMAP_MAX];
	size_t need = PVH_MEMMAP_OFF + PVH_MEMMAP_MAX * 24;
	unsigned n;

	if (len < need)
		return 0;
	memset(buf, 0, need);
	n = boot_e820_build(l->mem_size, e, PVH_MEMMAP_MAX);
	le32_put(buf + 0, PVH_MAGIC);
	le32_put(buf + 4, 1);  /* version 1: memmap present */
	le32_put(buf + 8, 0);  /* flags */
	if (l->initrd_size) {
		le32_put(buf + 12, 1);
		le64_put(buf + 16, BOOT_PVH_INFO_ADDR + PVH_MODLIST_OFF);
		le64_put(buf + PVH_MODLIST_OFF, l->initrd_addr);
		le64_put(buf + PVH_MODLIST_OFF + 8, l->initrd_size);
	}
	le64_put(buf + 24, l->cmdline_addr);
	le64_put(buf + 32, l->rsdp_addr);
	le64_put(buf + 40, BOOT_PVH_INFO_ADDR + PVH_MEMMAP_OFF);
	le32_put(buf + 48, n);
	for (unsigned i = 0; i < n; i++) {
		le64_put(buf + PVH_MEMMAP_OFF + 24 * i, e[i].addr);
		le64_put(buf + PVH_MEMMAP_OFF + 24 * i + 8, e[i].size);
		le32_put(buf + PVH_MEMMAP_OFF + 24 * i + 16, e[i].type);
	}
	return need;
}

/* A GDT descriptor: flags are the access byte (low 8 bits) and the G/DB/L nibble (12..15). */
static uint64_t gdt_entry(uint16_t flags, uint32_t base, uint32_t limit)
{
	return ((uint64_t)(base & 0xff000000u) << 32) | ((uint64_t)(base & 0x00ff0000u) << 16) |
	       ((uint64_t)(flags & 0xf0ffu) << 40) | ((uint64_t)(limit & 0xf0000u) << 32) |
	       ((uint64_t)(base & 0xffffu) << 16) | (limit & 0xffffu);
}

int boot_tables_setup(const struct vm_ram *ram, enum boot_proto proto)
{
	uint64_t gdt[4] = {
		0,
		gdt_entry(proto == BOOT_PVH ? 0xc09b : 0xa09b, 0, 0xfffff),
		gdt_entry(0xc093, 0, 0xfffff),
		gdt_entry(0x008b, 0, 0xfffff),
	};
	uint8_t *g = vm_ram_ptr(ram, BOOT_GDT_ADDR, sizeof(gdt) + 8);
	uint8_t *pt = vm_ram_ptr(ram, BOOT_PML4_ADDR, BOOT_PD_ADDR + 4 * 4096 - BOOT_PML4_ADDR);
	uint64_t *pml4, *pdpt, *pd;

	if (!g || !pt)
		return -EFAULT;
	memcpy(g, gdt, sizeof(gdt));
	memset(g + sizeof(gdt), 0, 8); /* IDT at 0x520: empty */
	if (proto == BOOT_PVH)
		return 0;
	pml4 = (uint64_t *)pt;
	pdpt = (uint64_t *)(pt + (BOOT_PDPT_ADDR - BOOT_PML4_ADDR));
	pd = (uint64_t *)(pt + (BOOT_PD_ADDR - BOOT_PML4_ADDR));
	memset(pml4, 0, 4096);
	memset(pdpt, 0, 4096);
	pml4[0] = BOOT_PDPT_ADDR | 0x3;         /* present, writable */
	for (unsigned i = 0; i < 4; i++)
		pdpt[i] = (BOOT_PD_ADDR + i * 4096u) | 0x3;
	for (unsigned i = 0; i < 4 * 512; i++)
		pd[i] = ((uint64_t)i << 21) | 0x83; /* present, writable, 2 MiB page */
	return 0;
}

int boot_memory_setup(const struct vm_ram *ram, const struct boot_kernel *k,
		      const struct boot_layout *l, const char *cmdline)
{
	uint8_t *cl = vm_ram_ptr(ram, l->cmdline_addr, l->cmdline_len + 1);
	uint8_t *zp = vm_ram_ptr(ram, BOOT_ZERO_PAGE_ADDR, 4096);
	uint8_t *pvh = vm_ram_ptr(ram, BOOT_PVH_INFO_ADDR, 4096);
	int ret = boot_tables_setup(ram, k->proto);

	if (ret || !cl || !zp || !pvh)
		return ret ? ret : -EFAULT;
	memcpy(cl, cmdline, l->cmdline_len + 1);
	if (k->proto == BOOT_PVH)
		boot_pvh_build(pvh, 4096, l);
	else
		boot_params_build(zp, k, l);
	return 0;
}
