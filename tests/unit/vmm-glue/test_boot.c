/* SPDX-License-Identifier: MIT */
/*
 * Kernel loading for the built-in VMM: a synthetic bzImage (setup header, payload), its
 * payload compressed here with each library (gzip, xz, lz4 legacy frame, zstd) around a
 * small fake vmlinux, the vmlinux cache, the fallback entry, ELF checks, e820, boot_params,
 * the command line, the PVH start info, the initrd placement and the boot page tables.
 */
#include <elf.h>
#include <sys/mman.h>
#include <lz4.h>
#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include "../helpers.h"
#include "../../../common/fsutil.h"
#include "../../../common/le.h"
#include "../../../common/log.h"
#include "../../../common/sha256.h"
#include "../../../vmm-glue/boot.h"

#define RAM_SIZE (64u << 20)
#define KERNEL_PADDR 0x200000u

struct ram {
	uint8_t *buf;
	struct vm_ram mem;
};

static void ram_new(struct ram *r, uint64_t size)
{
	r->buf = calloc(1, size);
	assert_non_null(r->buf);
	r->mem = (struct vm_ram){ .map = r->buf, .size = size, .nslots = 1 };
	r->mem.slot[0] = (struct vm_ram_slot){ .gpa = 0, .size = size, .host = r->buf };
}

/* An x86-64 ET_EXEC header with phnum program headers right after it. */
static void elf_header_init(Elf64_Ehdr *eh, uint64_t entry, uint16_t phnum)
{
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_EXEC;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_entry = entry;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(Elf64_Phdr);
	eh->e_phnum = phnum;
}

/* A fake vmlinux: one PT_LOAD of len bytes at paddr (vaddr high), optional PVH note. */
static uint8_t *make_elf(size_t len, uint64_t paddr, bool pvh, size_t *out_len)
{
	size_t off = 0x1000, total = off + len + (pvh ? 20 : 0);
	uint8_t *b = calloc(1, total);
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Phdr *ph = (Elf64_Phdr *)(b + sizeof(*eh));
	uint64_t seed = 42;

	assert_non_null(b);
	/* a virtual entry point: turned physical */
	elf_header_init(eh, 0xffffffff80000000ull + paddr + 0x10, pvh ? 2 : 1);
	ph[0].p_type = PT_LOAD;
	ph[0].p_offset = off;
	ph[0].p_vaddr = 0xffffffff80000000ull + paddr;
	ph[0].p_paddr = paddr;
	ph[0].p_filesz = len;
	ph[0].p_memsz = len + 0x1000; /* bss */
	prng_fill(&seed, b + off, len);
	if (pvh) {
		uint8_t *n = b + off + len;
		uint32_t v[3] = { 4, 4, 18 }, entry = (uint32_t)paddr + 0x20;

		ph[1].p_type = PT_NOTE;
		ph[1].p_offset = off + len;
		ph[1].p_filesz = 20;
		memcpy(n, v, 12);
		memcpy(n + 12, "Xen", 4);
		memcpy(n + 16, &entry, 4);
	}
	*out_len = total;
	return b;
}

/* Linux appends the uncompressed size (gzip's own trailer already is that size). */
static uint8_t *compress_gzip(const uint8_t *in, size_t len, size_t *out_len)
{
	z_stream z = { 0 };
	size_t cap = len + 1024;
	uint8_t *o = malloc(cap);

	assert_int_equal(deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY),
			 Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = o;
	z.avail_out = (uInt)cap;
	assert_int_equal(deflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = z.total_out;
	deflateEnd(&z);
	return o;
}

static uint8_t *compress_xz(const uint8_t *in, size_t len, size_t *out_len)
{
	size_t cap = len + 1024, pos = 0;
	uint8_t *o = malloc(cap);

	assert_int_equal(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC32, NULL, in, len, o, &pos,
						 cap - 4), LZMA_OK);
	le32_put(o + pos, (uint32_t)len);
	*out_len = pos + 4;
	return o;
}

/* LZ4 legacy frame: magic, blocks of (le32 size, data) of at most 8 MiB input each. */
static uint8_t *compress_lz4(const uint8_t *in, size_t len, size_t *out_len, size_t block)
{
	size_t cap = 4 + len + len / 100 + 1024 * (len / block + 2), pos = 4;
	uint8_t *o = malloc(cap);

	le32_put(o, 0x184c2102u);
	for (size_t i = 0; i < len; i += block) {
		size_t n = len - i < block ? len - i : block;
		int c = LZ4_compress_default((const char *)in + i, (char *)o + pos + 4, (int)n,
					     (int)(cap - pos - 8));

		assert_true(c > 0);
		le32_put(o + pos, (uint32_t)c);
		pos += 4 + (size_t)c;
	}
	le32_put(o + pos, (uint32_t)len);
	*out_len = pos + 4;
	return o;
}

static uint8_t *compress_zstd(const uint8_t *in, size_t len, size_t *out_len)
{
	size_t cap = ZSTD_compressBound(len) + 4;
	uint8_t *o = malloc(cap);
	size_t n = ZSTD_compress(o, cap - 4, in, len, 19);

	assert_false(ZSTD_isError(n));
	le32_put(o + n, (uint32_t)len);
	*out_len = n + 4;
	return o;
}

#define SETUP_SECTS 4
#define PM_OFF ((SETUP_SECTS + 1) * 512)
#define PAYLOAD_REL 0x100

/* A bzImage around payload: setup sectors with a 2.15 header, then the protected-mode part. */
static uint8_t *make_bzimage(const uint8_t *payload, size_t plen, size_t *out_len)
{
	size_t len = PM_OFF + PAYLOAD_REL + plen + 0x80;
	uint8_t *b = calloc(1, len);
	uint16_t v16;
	uint32_t v32;
	uint64_t v64;

	assert_non_null(b);
	b[0x1f1] = SETUP_SECTS;
	v16 = 0xaa55;
	memcpy(b + 0x1fe, &v16, 2);
	b[0x200] = 0xeb;
	b[0x201] = 0x6a; /* header ends at 0x26c */
	memcpy(b + 0x202, "HdrS", 4);
	v16 = 0x020f;
	memcpy(b + 0x206, &v16, 2);
	b[0x211] = 0x01; /* LOADED_HIGH */
	v32 = 0x7fffffff;
	memcpy(b + 0x22c, &v32, 4); /* initrd_addr_max */
	v32 = 0x200000;
	memcpy(b + 0x230, &v32, 4); /* kernel_alignment */
	v16 = 0x1 | 0x2;            /* XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G */
	memcpy(b + 0x236, &v16, 2);
	v32 = 2047;
	memcpy(b + 0x238, &v32, 4); /* cmdline_size */
	v32 = PAYLOAD_REL;
	memcpy(b + 0x248, &v32, 4);
	v32 = (uint32_t)plen;
	memcpy(b + 0x24c, &v32, 4);
	v64 = 0x1000000;
	memcpy(b + 0x258, &v64, 8); /* pref_address */
	v32 = 0x400000;
	memcpy(b + 0x260, &v32, 4); /* init_size */
	memset(b + PM_OFF, 0x90, PAYLOAD_REL);
	memcpy(b + PM_OFF + PAYLOAD_REL, payload, plen);
	*out_len = len;
	return b;
}

static void test_bzimage_parse(void **state)
{
	uint8_t payload[64] = { 0x28, 0xb5, 0x2f, 0xfd };
	struct bzimage bz;
	char why[WHY_MAX] = "";
	size_t len;
	uint8_t *b = make_bzimage(payload, sizeof(payload), &len);

	(void)state;
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), 0);
	assert_int_equal(bz.version, 0x020f);
	assert_int_equal(bz.setup_sects, SETUP_SECTS);
	assert_int_equal(bz.pm_off, PM_OFF);
	assert_int_equal(bz.payload_off, PM_OFF + PAYLOAD_REL);
	assert_int_equal(bz.payload_len, sizeof(payload));
	assert_int_equal(bz.hdr_len, 0x26c - 0x1f1);
	assert_int_equal(bz.pref_address, 0x1000000);
	assert_int_equal(bz.init_size, 0x400000);
	assert_int_equal(bz.cmdline_size, 2047);
	assert_string_equal(bzimage_compression(b + bz.payload_off, bz.payload_len), "zstd");

	/* setup_sects 0 means 4 */
	b[0x1f1] = 0;
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), 0);
	assert_int_equal(bz.pm_off, PM_OFF);
	free(b);
}

static void test_bzimage_bad(void **state)
{
	uint8_t payload[64] = { 0x1f, 0x8b };
	struct bzimage bz;
	char why[WHY_MAX] = "";
	size_t len;
	uint8_t *b = make_bzimage(payload, sizeof(payload), &len);
	uint32_t v;

	(void)state;
	/* truncated: shorter than the setup sectors, and shorter than the header */
	assert_int_equal(bzimage_parse(b, 0x300, &bz, why, sizeof(why)), -EINVAL);
	assert_true(why[0]);
	assert_int_equal(bzimage_parse(b, PM_OFF, &bz, why, sizeof(why)), -EINVAL);
	/* payload outside the file */
	assert_int_equal(bzimage_parse(b, PM_OFF + PAYLOAD_REL + 10, &bz, why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "outside"));
	v = 0xfffffff0;
	memcpy(b + 0x248, &v, 4);
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), -EINVAL);
	v = PAYLOAD_REL;
	memcpy(b + 0x248, &v, 4);
	/* bad magic */
	b[0x202] = 'X';
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "magic"));
	b[0x202] = 'H';
	/* protocol too old, no 64-bit entry */
	b[0x206] = 0x0a;
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), -ENOEXEC);
	b[0x206] = 0x0f;
	b[0x236] = 0x2;
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), -ENOEXEC);
	b[0x236] = 0x3;
	assert_int_equal(bzimage_parse(b, len, &bz, why, sizeof(why)), 0);
	free(b);
}

/* Decompress with each compressor and boot the result as an ELF. */
static void roundtrip(uint8_t *(*comp)(const uint8_t *, size_t, size_t *), const char *name)
{
	struct ram r;
	struct boot_kernel k = { 0 };
	char why[WHY_MAX] = "";
	size_t elen, clen, dlen;
	uint8_t *elf = make_elf(300000, KERNEL_PADDR, false, &elen);
	uint8_t *c = comp(elf, elen, &clen), *d = NULL;

	assert_string_equal(bzimage_compression(c, clen), name);
	assert_int_equal(bzimage_decompress(c, clen, 1u << 20, &d, &dlen, why, sizeof(why)), 0);
	assert_int_equal(dlen, elen);
	assert_memory_equal(d, elf, elen);
	ram_new(&r, RAM_SIZE);
	assert_int_equal(elf_load(d, dlen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), 0);
	assert_int_equal(k.entry, KERNEL_PADDR + 0x10);
	assert_int_equal(k.lo, KERNEL_PADDR);
	assert_int_equal(k.hi, KERNEL_PADDR + 300000 + 0x1000);
	assert_memory_equal(r.buf + KERNEL_PADDR, elf + 0x1000, 300000);

	/* a limit below the declared size: refused before anything is inflated */
	free(d);
	d = NULL;
	assert_int_equal(bzimage_decompress(c, clen, elen - 1, &d, &dlen, why, sizeof(why)),
			 -EFBIG);
	assert_null(d);
	/* truncated (lz4 legacy and zstd without a checksum cannot see flipped literals) */
	assert_int_not_equal(bzimage_decompress(c, clen / 2, 1u << 20, &d, &dlen, why, sizeof(why)),
			     0);
	assert_null(d);
	memmove(c + clen / 2, c + clen - 4, 4); /* the right trailer, half the stream */
	assert_int_not_equal(bzimage_decompress(c, clen / 2 + 4, 1u << 20, &d, &dlen, why,
						sizeof(why)), 0);
	assert_null(d);
	free(r.buf);
	free(elf);
	free(c);
}

static uint8_t *lz4_8m(const uint8_t *in, size_t len, size_t *out_len)
{
	return compress_lz4(in, len, out_len, 8u << 20);
}

static uint8_t *lz4_small_blocks(const uint8_t *in, size_t len, size_t *out_len)
{
	return compress_lz4(in, len, out_len, 65536);
}

static void test_decompress_gzip(void **state) { (void)state; roundtrip(compress_gzip, "gzip"); }
static void test_decompress_xz(void **state) { (void)state; roundtrip(compress_xz, "xz"); }
static void test_decompress_lz4(void **state)
{
	(void)state;
	roundtrip(lz4_8m, "lz4");
	roundtrip(lz4_small_blocks, "lz4");
}
static void test_decompress_zstd(void **state) { (void)state; roundtrip(compress_zstd, "zstd"); }

static void test_decompress_bomb(void **state)
{
	size_t n = 4u << 20, clen, dlen;
	uint8_t *zeros = calloc(1, n), *c, *d = NULL;
	char why[WHY_MAX] = "";

	(void)state;
	/* 4 MiB of zeros, honest trailer, 1 MiB limit */
	c = compress_zstd(zeros, n, &clen);
	assert_int_equal(bzimage_decompress(c, clen, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EFBIG);
	/* a trailer that lies (declares 4 KiB): stops at the declared size */
	le32_put(c + clen - 4, 4096);
	assert_int_equal(bzimage_decompress(c, clen, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EFBIG);
	assert_null(d);
	free(c);
	c = compress_gzip(zeros, n, &clen);
	le32_put(c + clen - 4, 4096);
	assert_int_equal(bzimage_decompress(c, clen, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EFBIG);
	free(c);
	c = compress_xz(zeros, n, &clen);
	le32_put(c + clen - 4, 4096);
	assert_int_equal(bzimage_decompress(c, clen, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EFBIG);
	free(c);
	/* unknown and unsupported compressors */
	assert_int_equal(bzimage_decompress(zeros, 64, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	memcpy(zeros, "BZh9", 4);
	assert_int_equal(bzimage_decompress(zeros, 64, 1u << 20, &d, &dlen, why, sizeof(why)),
			 -EPROTONOSUPPORT);
	free(zeros);
}

/* A note_sink that keeps the last info line in arg (char[256]). */
static void note_keep(void *arg, enum note_kind kind, const char *line)
{
	if (kind == NOTE_INFO)
		snprintf(arg, 256, "%s", line);
}

/* The whole path from a file: decompressed, cached, then taken from the cache. */
static void test_kernel_load_cache(void **state)
{
	char dir[PATH_MAX], kpath[PATH_MAX], cache[PATH_MAX], why[PATH_MAX + 128];
	struct boot_kernel_opts o = { .proto = BOOT_LINUX64 };
	struct boot_kernel k;
	struct ram r;
	size_t elen, clen, blen;
	uint8_t *elf = make_elf(100000, 0x1000000, false, &elen);
	uint8_t *c = compress_gzip(elf, elen, &clen);
	uint8_t *bz = make_bzimage(c, clen, &blen);

	(void)state;
	tmpdir_make(dir);
	path_fmt(kpath, "%s/vmlinuz", dir);
	path_fmt(cache, "%s/cache", dir);
	write_file(kpath, bz, blen);
	o.cache_dir = cache;
	ram_new(&r, RAM_SIZE);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	assert_non_null(strstr(k.how, "decompressed"));
	assert_int_equal(k.entry, 0x1000000 + 0x10);
	assert_int_equal(k.hdr_len, 0x26c - 0x1f1);
	assert_int_equal(k.cmdline_size, 2047);
	assert_memory_equal(r.buf + 0x1000000, elf + 0x1000, 100000);
	memset(r.buf, 0, RAM_SIZE);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	assert_non_null(strstr(k.how, "cache"));
	assert_memory_equal(r.buf + 0x1000000, elf + 0x1000, 100000);

	/* PVH from a bzImage without the note: refused */
	o.proto = BOOT_PVH;
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, why, sizeof(why)), -ENOEXEC);
	assert_true(!strncmp(why, "kernel ", 7) && strstr(why, kpath));
	rm_rf(dir);
	free(r.buf);
	free(elf);
	free(c);
	free(bz);
}

/* A note_sink that counts warnings and keeps the last one in a struct warn_keep. */
struct warn_keep {
	unsigned n;
	char last[PATH_MAX + 128];
};

static void warn_keep(void *arg, enum note_kind kind, const char *line)
{
	struct warn_keep *w = arg;

	if (kind == NOTE_WARN) {
		w->n++;
		snprintf(w->last, sizeof(w->last), "%s", line);
	}
}

static mode_t perm_of(const char *path)
{
	struct stat st;

	assert_int_equal(lstat(path, &st), 0);
	return st.st_mode & 07777;
}

/*
 * The vmlinux cache is read back from, so it must be this user's alone (issue 24 follow-up,
 * item 3): a directory another user made first, with a "cached vmlinux" of theirs under the
 * name the bzImage's digest gives (a distribution's kernel is public), is neither read nor
 * written — the guest boots the bzImage's own payload — after one warning; one others may
 * write or a link is not used either. A new one is made 0700, its files 0600.
 */
static void test_kernel_cache_private(void **state)
{
	char dir[PATH_MAX], kpath[PATH_MAX], cache[PATH_MAX], planted[PATH_MAX], hex[65];
	struct warn_keep w = { 0 };
	struct boot_kernel_opts o = { .proto = BOOT_LINUX64,
				      .notes = { .fn = warn_keep, .arg = &w } };
	struct boot_kernel k;
	struct ram r;
	size_t elen, clen, blen, flen;
	uint8_t *elf = make_elf(100000, 0x1000000, false, &elen);
	uint8_t *fake = make_elf(100000, 0x1000000, false, &flen);
	uint8_t *c = compress_gzip(elf, elen, &clen);
	uint8_t *bz = make_bzimage(c, clen, &blen);
	uint8_t d[SHA256_LEN];
	mode_t old_mask;

	(void)state;
	memset(fake + 0x1000, 0xcc, 100000);   /* the other user's "kernel" */
	tmpdir_make(dir);
	path_fmt(kpath, "%s/vmlinuz", dir);
	write_file(kpath, bz, blen);
	assert_int_equal(sha256_buf(bz, blen, d), 0);
	sha256_to_hex(d, hex);
	ram_new(&r, RAM_SIZE);

	/* a new cache: 0700, the vmlinux in it 0600, whatever the umask */
	path_fmt(cache, "%s/mine", dir);
	o.cache_dir = cache;
	old_mask = umask(022);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	umask(old_mask);
	assert_int_equal(perm_of(cache), 0700);
	path_fmt(planted, "%s/%s", cache, hex);
	assert_int_equal(perm_of(planted), 0600);
	assert_int_equal(w.n, 0);

	/* another user's directory, with their vmlinux planted under the bzImage's digest */
	if (geteuid() == 0) {
		path_fmt(cache, "%s/theirs", dir);
		assert_int_equal(mkdir(cache, 0755), 0);
		path_fmt(planted, "%s/%s", cache, hex);
		write_file(planted, fake, flen);
		assert_int_equal(chown(planted, 65534, 65534), 0);
		assert_int_equal(chown(cache, 65534, 65534), 0);
		o.cache_dir = cache;
		memset(r.buf, 0, RAM_SIZE);
		assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
		assert_non_null(strstr(k.how, "decompressed"));
		assert_memory_equal(r.buf + 0x1000000, elf + 0x1000, 100000);
		assert_int_equal(w.n, 1);
		assert_non_null(strstr(w.last, cache));
		assert_non_null(strstr(w.last, "owned by another user"));
		path_fmt(planted, "%s/digests", cache);
		assert_int_equal(access(planted, F_OK), -1); /* nothing written there */
	}
	/* one of ours that others may write, and a link to our own: not used */
	path_fmt(cache, "%s/open", dir);
	assert_int_equal(mkdir(cache, 0700), 0);
	assert_int_equal(chmod(cache, 0777), 0);
	o.cache_dir = cache;
	w.n = 0;
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	assert_non_null(strstr(k.how, "decompressed"));
	assert_int_equal(w.n, 1);
	assert_non_null(strstr(w.last, "writable by its group or others"));
	path_fmt(planted, "%s/%s", cache, hex);
	assert_int_equal(access(planted, F_OK), -1);
	path_fmt(cache, "%s/link", dir);
	path_fmt(planted, "%s/mine", dir);
	assert_int_equal(symlink(planted, cache), 0);
	w.n = 0;
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	assert_non_null(strstr(k.how, "decompressed"));
	assert_non_null(strstr(w.last, "a symbolic link"));

	rm_rf(dir);
	free(r.buf);
	free(elf);
	free(fake);
	free(c);
	free(bz);
}

/* A payload this loader cannot decompress: the bzImage's own 64-bit entry at pref + 0x200. */
static void test_kernel_fallback(void **state)
{
	char dir[PATH_MAX], kpath[PATH_MAX], why[PATH_MAX + 128], want[PATH_MAX], note[256] = "";
	struct boot_kernel_opts o = { .proto = BOOT_LINUX64,
				      .notes = { .fn = note_keep, .arg = note } };
	struct boot_kernel k;
	struct ram r;
	uint8_t payload[256] = { 'B', 'Z', 'h', '9' };
	size_t blen;
	uint8_t *bz = make_bzimage(payload, sizeof(payload), &blen);

	(void)state;
	tmpdir_make(dir);
	path_fmt(kpath, "%s/vmlinuz", dir);
	write_file(kpath, bz, blen);
	o.cache_dir = dir;
	ram_new(&r, RAM_SIZE);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), 0);
	/* said as a detail, not printed: the caller's notes get it */
	assert_string_equal(note, "bzip2 payload: payload compression not supported here "
			    "(bzip2, lzma or lzo): using the bzImage's own decompressor (slow "
			    "under software KVM)");
	assert_int_equal(k.proto, BOOT_LINUX64);
	assert_int_equal(k.entry, 0x1000000 + 0x200);
	assert_int_equal(k.lo, 0x1000000);
	assert_int_equal(k.hi, 0x1000000 + 0x400000);
	assert_memory_equal(r.buf + 0x1000000, bz + PM_OFF, blen - PM_OFF);
	free(r.buf);

	/* not enough RAM at pref_address for init_size */
	ram_new(&r, 16u << 20);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), -ENOSPC);
	free(r.buf);

	/* a text file and a truncated bzImage: clean errors, one line each */
	write_file(kpath, "#!/bin/sh\necho not a kernel\n", 28);
	ram_new(&r, RAM_SIZE);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, why, sizeof(why)), -ENOEXEC);
	path_fmt(want, "kernel %s: not a kernel (neither a bzImage nor an ELF vmlinux)", kpath);
	assert_string_equal(why, want);
	write_file(kpath, bz, 0x400);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, NULL, 0), -EINVAL);
	path_fmt(kpath, "%s/missing", dir);
	assert_int_equal(boot_kernel_load(kpath, &o, &r.mem, &k, why, sizeof(why)), -ENOENT);
	path_fmt(want, "kernel %s: %s", kpath, strerror(ENOENT));
	assert_string_equal(why, want);
	rm_rf(dir);
	free(r.buf);
	free(bz);
}

/*
 * The checks run before the VM exists (no /dev/kvm needed): the loaders' own lines for a
 * missing file, a file that is not a kernel, an empty or missing initrd; a bzImage, even a
 * truncated one (the loader says what is wrong with it), passes.
 */
static void test_kernel_check(void **state)
{
	char dir[PATH_MAX], kpath[PATH_MAX], why[PATH_MAX + 128], want[PATH_MAX];
	uint8_t payload[256] = { 'B', 'Z', 'h', '9' };
	size_t blen;
	uint8_t *bz = make_bzimage(payload, sizeof(payload), &blen);

	(void)state;
	tmpdir_make(dir);
	path_fmt(kpath, "%s/vmlinuz", dir);
	write_file(kpath, bz, blen);
	assert_int_equal(boot_kernel_check(kpath, why, sizeof(why)), 0);
	write_file(kpath, bz, 0x400);
	assert_int_equal(boot_kernel_check(kpath, why, sizeof(why)), 0);
	write_file(kpath, "#!/bin/sh\necho not a kernel\n", 28);
	assert_int_equal(boot_kernel_check(kpath, why, sizeof(why)), -ENOEXEC);
	path_fmt(want, "kernel %s: not a kernel (neither a bzImage nor an ELF vmlinux)", kpath);
	assert_string_equal(why, want);
	/* the initrd: a non-empty regular file */
	assert_int_equal(boot_initrd_check(kpath, why, sizeof(why)), 0);
	write_file(kpath, "", 0);
	assert_int_equal(boot_initrd_check(kpath, why, sizeof(why)), -EINVAL);
	path_fmt(want, "initrd %s: not a non-empty regular file", kpath);
	assert_string_equal(why, want);
	assert_int_equal(boot_initrd_check(dir, why, sizeof(why)), -EINVAL);
	path_fmt(kpath, "%s/missing", dir);
	assert_int_equal(boot_kernel_check(kpath, why, sizeof(why)), -ENOENT);
	path_fmt(want, "kernel %s: %s", kpath, strerror(ENOENT));
	assert_string_equal(why, want);
	assert_int_equal(boot_initrd_check(kpath, why, sizeof(why)), -ENOENT);
	path_fmt(want, "initrd %s: %s", kpath, strerror(ENOENT));
	assert_string_equal(why, want);
	rm_rf(dir);
	free(bz);
}

static void test_elf_bad(void **state)
{
	struct boot_kernel k;
	struct ram r;
	char why[WHY_MAX] = "";
	size_t elen;
	uint8_t *elf;
	Elf64_Phdr *ph;

	(void)state;
	ram_new(&r, 4u << 20);
	/* outside RAM */
	elf = make_elf(8192, 0x800000, false, &elen);
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), -ENOSPC);
	free(elf);
	/* over the VMM's pages below 1 MiB */
	elf = make_elf(8192, 0x7000, false, &elen);
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), -EINVAL);
	free(elf);
	/* file size beyond the file; program headers beyond the file */
	elf = make_elf(8192, KERNEL_PADDR, false, &elen);
	assert_int_equal(elf_load(elf, elen - 100, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)),
			 -EINVAL);
	assert_int_equal(elf_load(elf, 100, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), -EINVAL);
	/* PVH without the note */
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_PVH, &k, why, sizeof(why)), -ENOEXEC);
	/* entry outside every segment */
	((Elf64_Ehdr *)elf)->e_entry = 0x12345;
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), -ENOEXEC);
	/* 32-bit */
	elf[EI_CLASS] = ELFCLASS32;
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), -ENOEXEC);
	free(elf);
	/* a segment that wraps around */
	elf = make_elf(8192, KERNEL_PADDR, false, &elen);
	ph = (Elf64_Phdr *)(elf + sizeof(Elf64_Ehdr));
	ph->p_paddr = UINT64_MAX - 100;
	assert_int_not_equal(elf_load(elf, elen, &r.mem, BOOT_LINUX64, &k, why, sizeof(why)), 0);
	free(elf);
	/* PVH with the note */
	elf = make_elf(8192, KERNEL_PADDR, true, &elen);
	assert_int_equal(elf_load(elf, elen, &r.mem, BOOT_PVH, &k, why, sizeof(why)), 0);
	assert_int_equal(k.entry, KERNEL_PADDR + 0x20);
	assert_int_equal(k.proto, BOOT_PVH);
	free(elf);
	free(r.buf);
}

/* The kernel release a bzImage's setup header names (what the initramfs builder needs). */
static void test_bzimage_kernel_version(void **state)
{
	uint8_t payload[64] = { 0x1f, 0x8b };
	static const char rel[] = "6.1.0-99-test (me@host) #1";
	char why[WHY_MAX] = "";
	const char *s = NULL;
	size_t len, max = 0;
	uint8_t *b = make_bzimage(payload, sizeof(payload), &len);
	uint16_t off;

	(void)state;
	/* a header without the string */
	assert_int_equal(bzimage_kernel_version(b, len, &s, &max, why, sizeof(why)), -ENOEXEC);
	assert_non_null(strstr(why, "no kernel_version"));
	/* kernel_version: an offset from 0x200 */
	off = 0x100;
	memcpy(b + 0x20e, &off, 2);
	memcpy(b + 0x300, rel, sizeof(rel));
	assert_int_equal(bzimage_kernel_version(b, len, &s, &max, why, sizeof(why)), 0);
	assert_ptr_equal(s, (const char *)b + 0x300);
	assert_int_equal(max, len - 0x300);
	/* only "HdrS" is needed: no boot flag, and far too short to boot */
	b[0x1fe] = 0;
	assert_int_equal(bzimage_kernel_version(b, 0x301, &s, &max, why, sizeof(why)), 0);
	assert_int_equal(max, 1);
	/* the string at or past the end of the file; a protocol before 2.00 */
	assert_int_equal(bzimage_kernel_version(b, 0x300, &s, &max, why, sizeof(why)), -ENOEXEC);
	b[0x207] = 0x01;
	assert_int_equal(bzimage_kernel_version(b, len, &s, &max, why, sizeof(why)), -ENOEXEC);
	/* no setup header: not a bzImage */
	assert_int_equal(bzimage_kernel_version(b, 0x20f, &s, &max, why, sizeof(why)), -ENOENT);
	memcpy(b + 0x202, "HdrX", 4);
	assert_int_equal(bzimage_kernel_version(b, len, &s, &max, why, sizeof(why)), -ENOENT);
	free(b);
}

/*
 * A relocatable ELF64 (a kernel module's shape) at out + shift (shift: a misaligned copy
 * is read as well): sections null, .modinfo, .shstrtab. Its length.
 */
static size_t make_module(uint8_t *out, size_t shift)
{
	static const char info[] = "license=GPL\0depends=virtio";
	static const char names[] = "\0.modinfo\0.shstrtab";
	_Alignas(8) uint8_t b[1024] = { 0 };
	Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
	Elf64_Shdr sh[3] = { 0 };
	size_t info_off = 64, names_off = info_off + sizeof(info), sh_off = 256;

	elf_header_init(eh, 0, 0);
	eh->e_type = ET_REL;
	eh->e_phoff = 0;
	eh->e_shoff = sh_off;
	eh->e_shentsize = sizeof(Elf64_Shdr);
	eh->e_shnum = 3;
	eh->e_shstrndx = 2;
	memcpy(b + info_off, info, sizeof(info));
	memcpy(b + names_off, names, sizeof(names));
	sh[1].sh_name = 1;
	sh[1].sh_offset = info_off;
	sh[1].sh_size = sizeof(info);
	sh[2].sh_name = 10;
	sh[2].sh_offset = names_off;
	sh[2].sh_size = sizeof(names);
	memcpy(b + sh_off, sh, sizeof(sh));
	memcpy(out + shift, b, sh_off + sizeof(sh));
	return sh_off + sizeof(sh);
}

/* What the initramfs builder asks of an ELF: 64-bit LE, static, a section, the banner. */
static void test_elf_inspect(void **state)
{
	uint8_t buf[1024 + 8], *m = buf + 1, *elf;
	const uint8_t *data;
	const char *s;
	size_t len, elen, size, max;
	Elf64_Phdr *ph;
	uint16_t v;

	(void)state;
	/* sections, read from a misaligned copy */
	len = make_module(buf, 1);
	assert_true(elf_is_elf64le(m, len));
	assert_int_equal(elf_section(m, len, ".modinfo", &data, &size), 0);
	assert_ptr_equal(data, m + 64);
	assert_int_equal(size, sizeof("license=GPL\0depends=virtio"));
	assert_int_equal(elf_section(m, len, ".modinf", &data, &size), 0);
	assert_null(data);
	assert_int_equal(size, 0);
	assert_int_equal(elf_section(m, len, ".shstrtab", &data, &size), 0);
	assert_non_null(data);
	/* the section, the section headers or the names outside the file; not an ELF64 LE */
	assert_int_equal(elf_section(m, 64 + 10, ".modinfo", &data, &size), -ENOEXEC);
	assert_int_equal(elf_section(m, len - 1, ".modinfo", &data, &size), -ENOEXEC);
	v = 3;
	memcpy(m + offsetof(Elf64_Ehdr, e_shstrndx), &v, 2);
	assert_int_equal(elf_section(m, len, ".modinfo", &data, &size), -ENOEXEC);
	m[EI_DATA] = ELFDATA2MSB;
	assert_false(elf_is_elf64le(m, len));
	assert_int_equal(elf_section(m, len, ".modinfo", &data, &size), -ENOEXEC);
	assert_false(elf_is_elf64le(m, 63));
	assert_int_equal(elf_is_static(m, len), -ENOEXEC);

	/* static or dynamic */
	elf = make_elf(4096, KERNEL_PADDR, true, &elen);
	assert_int_equal(elf_is_static(elf, elen), 1);
	ph = (Elf64_Phdr *)(elf + sizeof(Elf64_Ehdr));
	ph[1].p_type = PT_INTERP;
	assert_int_equal(elf_is_static(elf, elen), 0);
	assert_int_equal(elf_is_static(elf, sizeof(Elf64_Ehdr) + 60), -ENOEXEC);
	((Elf64_Ehdr *)elf)->e_machine = EM_AARCH64;
	assert_int_equal(elf_is_static(elf, elen), -ENOEXEC);

	/* the "Linux version" banner */
	assert_int_equal(elf_linux_version(elf, elen, &s, &max), -ENOENT);
	memcpy(elf + 3000, "Linux version 6.9.1-custom (me@host)", 36);
	assert_int_equal(elf_linux_version(elf, elen, &s, &max), 0);
	assert_ptr_equal(s, (const char *)elf + 3014);
	assert_int_equal(max, elen - 3014);
	free(elf);
}

static void test_e820(void **state)
{
	struct e820_entry e[BOOT_E820_MAX];
	unsigned n;

	(void)state;
	n = boot_e820_build(64u << 20, e, BOOT_E820_MAX);
	assert_int_equal(n, 4);
	assert_true(e[0].addr == 0 && e[0].size == 0x9fc00 && e[0].type == E820_RAM);
	assert_true(e[1].addr == 0x9fc00 && e[1].size == 0x100000 - 0x9fc00 &&
		    e[1].type == E820_RESERVED);
	assert_true(e[2].addr == 0x100000 && e[2].size == (64u << 20) - 0x100000 &&
		    e[2].type == E820_RAM);
	assert_true(e[3].addr == 0xc0000000 && e[3].size == 0x40000000 &&
		    e[3].type == E820_RESERVED);

	n = boot_e820_build(3ull << 30, e, BOOT_E820_MAX);
	assert_int_equal(n, 4);
	assert_int_equal(e[2].addr + e[2].size, 3ull << 30);

	n = boot_e820_build(8ull << 30, e, BOOT_E820_MAX);
	assert_int_equal(n, 5);
	assert_int_equal(e[2].addr + e[2].size, 3ull << 30);
	assert_true(e[4].addr == 1ull << 32 && e[4].size == 5ull << 30 && e[4].type == E820_RAM);

	/* the caller's table is never overrun */
	n = boot_e820_build(8ull << 30, e, 2);
	assert_int_equal(n, 2);
}

static void test_cmdline(void **state)
{
	char buf[BOOT_CMDLINE_MAX];

	(void)state;
	assert_int_equal(boot_cmdline_build("console=ttyS0", 2, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "console=ttyS0 virtio_mmio.device=4K@0xd0000000:5 "
				 "virtio_mmio.device=4K@0xd0001000:6");
	assert_int_equal(boot_cmdline_build(NULL, 1, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "virtio_mmio.device=4K@0xd0000000:5");
	assert_int_equal(boot_cmdline_build("", 0, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "");
	assert_int_equal(boot_cmdline_build("quiet", 1, buf, 20), -ENAMETOOLONG);
	assert_int_equal(boot_cmdline_build("0123456789", 0, buf, 10), -ENAMETOOLONG);
	assert_int_equal(boot_cmdline_build("012345678", 0, buf, 10), 0);
}

static void test_boot_params(void **state)
{
	uint8_t zp[4096];
	struct boot_kernel k = { .proto = BOOT_LINUX64 };
	struct boot_layout l = {
		.mem_size = 5ull << 30, .cmdline_addr = BOOT_CMDLINE_ADDR, .cmdline_len = 10,
		.initrd_addr = 0x7f000000, .initrd_size = 0x123456, .rsdp_addr = BOOT_ACPI_ADDR,
	};

	(void)state;
	/* no setup header (a vmlinux ELF): a minimal one is made */
	boot_params_build(zp, &k, &l);
	assert_int_equal(zp[0x1fe] | zp[0x1ff] << 8, 0xaa55);
	assert_memory_equal(zp + 0x202, "HdrS", 4);
	assert_int_equal(zp[0x210], 0xff);          /* type_of_loader */
	assert_true(zp[0x211] & 0x01);              /* LOADED_HIGH */
	assert_int_equal(le32_get(zp + 0x228), BOOT_CMDLINE_ADDR);
	assert_int_equal(le32_get(zp + 0x238), BOOT_CMDLINE_MAX - 1);
	assert_int_equal(le32_get(zp + 0x218), 0x7f000000);
	assert_int_equal(le32_get(zp + 0x21c), 0x123456);
	assert_int_equal(le64_get(zp + 0x070), BOOT_ACPI_ADDR);
	assert_int_equal(zp[0x1e8], 5);
	assert_int_equal(le64_get(zp + 0x2d0 + 20 * 4), 1ull << 32);
	assert_int_equal(le64_get(zp + 0x2d0 + 20 * 4 + 8), 2ull << 30);
	assert_int_equal(le32_get(zp + 0x2d0 + 20 * 4 + 16), E820_RAM);

	/* a bzImage's header is copied as it is, then the loader's fields set */
	memset(k.hdr, 0, sizeof(k.hdr));
	k.hdr[0x206 - 0x1f1] = 0x0f;
	k.hdr[0x207 - 0x1f1] = 0x02;
	k.hdr[0x211 - 0x1f1] = 0x80;
	memcpy(k.hdr + 0x202 - 0x1f1, "HdrS", 4);
	k.hdr_len = 0x26c - 0x1f1;
	boot_params_build(zp, &k, &l);
	assert_int_equal(zp[0x206] | zp[0x207] << 8, 0x020f);
	assert_int_equal(zp[0x211], 0x81);
	assert_int_equal(zp[0x210], 0xff);
	assert_int_equal(le32_get(zp + 0x238), 0); /* the kernel's own (here 0) */
}

static void test_pvh_info(void **state)
{
	uint8_t b[4096];
	struct boot_layout l = {
		.mem_size = 128u << 20, .cmdline_addr = BOOT_CMDLINE_ADDR, .cmdline_len = 4,
		.initrd_addr = 0x7000000, .initrd_size = 0x1000, .rsdp_addr = BOOT_ACPI_ADDR,
	};
	size_t n;

	(void)state;
	n = boot_pvh_build(b, sizeof(b), &l);
	assert_true(n > 56 && n <= sizeof(b));
	assert_int_equal(le32_get(b), 0x336ec578);
	assert_int_equal(le32_get(b + 4), 1);
	assert_int_equal(le32_get(b + 12), 1);                         /* nr_modules */
	assert_int_equal(le64_get(le64_get(b + 16) - BOOT_PVH_INFO_ADDR + b), 0x7000000);
	assert_int_equal(le64_get(b + 24), BOOT_CMDLINE_ADDR);
	assert_int_equal(le64_get(b + 32), BOOT_ACPI_ADDR);
	assert_int_equal(le32_get(b + 48), 4);                         /* memmap entries */
	uint8_t *mm = b + (le64_get(b + 40) - BOOT_PVH_INFO_ADDR);
	assert_int_equal(le64_get(mm + 2 * 24), 0x100000);
	assert_int_equal(le64_get(mm + 2 * 24 + 8), (128u << 20) - 0x100000);
	assert_int_equal(le32_get(mm + 2 * 24 + 16), E820_RAM);
	/* no initrd: no module */
	l.initrd_size = 0;
	boot_pvh_build(b, sizeof(b), &l);
	assert_int_equal(le32_get(b + 12), 0);
	assert_int_equal(boot_pvh_build(b, 64, &l), 0);
}

static void test_tables_and_initrd(void **state)
{
	char dir[PATH_MAX], path[PATH_MAX], why[PATH_MAX + 128], want[PATH_MAX];
	struct boot_kernel k = { .proto = BOOT_LINUX64, .lo = KERNEL_PADDR,
				 .hi = KERNEL_PADDR + 0x100000, .initrd_addr_max = 0x7fffffff };
	struct ram r;
	uint64_t addr = 0, size = 0, seed = 7;
	uint8_t data[10000];

	(void)state;
	ram_new(&r, RAM_SIZE);
	assert_int_equal(boot_tables_setup(&r.mem, BOOT_LINUX64), 0);
	assert_int_equal(le64_get(r.buf + BOOT_GDT_ADDR + 8), 0x00af9b000000ffffull);
	assert_int_equal(le64_get(r.buf + BOOT_GDT_ADDR + 16), 0x00cf93000000ffffull);
	assert_int_equal(le64_get(r.buf + BOOT_PML4_ADDR), BOOT_PDPT_ADDR | 3);
	assert_int_equal(le64_get(r.buf + BOOT_PDPT_ADDR + 8 * 3), (BOOT_PD_ADDR + 3 * 4096) | 3);
	assert_int_equal(le64_get(r.buf + BOOT_PD_ADDR + 8 * 2047), (2047ull << 21) | 0x83);
	assert_int_equal(boot_tables_setup(&r.mem, BOOT_PVH), 0);
	assert_int_equal(le64_get(r.buf + BOOT_GDT_ADDR + 8), 0x00cf9b000000ffffull);

	tmpdir_make(dir);
	path_fmt(path, "%s/initrd", dir);
	prng_fill(&seed, data, sizeof(data));
	write_file(path, data, sizeof(data));
	assert_int_equal(boot_initrd_load(path, &r.mem, &k, &addr, &size, NULL, 0), 0);
	assert_int_equal(size, sizeof(data));
	assert_int_equal(addr % 4096, 0);
	assert_true(addr >= k.hi && addr + size <= RAM_SIZE);
	assert_memory_equal(r.buf + addr, data, sizeof(data));
	/* below initrd_addr_max */
	k.initrd_addr_max = 0x1ffffff;
	assert_int_equal(boot_initrd_load(path, &r.mem, &k, &addr, &size, NULL, 0), 0);
	assert_true(addr + size <= 0x2000000);
	/* no room above the kernel */
	k.hi = RAM_SIZE - 4096;
	k.initrd_addr_max = 0x7fffffff;
	assert_int_equal(boot_initrd_load(path, &r.mem, &k, &addr, &size, why, sizeof(why)),
			 -ENOSPC);
	assert_non_null(strstr(why, "do not fit in guest RAM next to the kernel (more --mem)"));
	path_fmt(path, "%s/missing", dir);
	assert_int_equal(boot_initrd_load(path, &r.mem, &k, &addr, &size, why, sizeof(why)),
			 -ENOENT);
	path_fmt(want, "initrd %s: %s", path, strerror(ENOENT));
	assert_string_equal(why, want);
	rm_rf(dir);
	free(r.buf);
}

/* Does /proc/self/maps show `path` mapped over [a, a + len)? */
static bool mapped_from(const void *a, size_t len, const char *path)
{
	uintptr_t lo = (uintptr_t)a, hi = lo + len;
	char line[PATH_MAX + 128];
	FILE *f = fopen("/proc/self/maps", "r");
	bool found = false;

	assert_non_null(f);
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned long s, e;
		char *name = strchr(line, '/');

		if (sscanf(line, "%lx-%lx", &s, &e) == 2 && name && s <= lo && hi <= e &&
		    !strncmp(name, path, strlen(path)))
			found = true;
	}
	fclose(f);
	return found;
}

/*
 * elf_load_mapped: a segment whose file offset and address agree modulo the page size is
 * mapped copy-on-write (whole pages; the partial pages at its ends copied, so bytes after
 * p_filesz in the file never reach the guest); another is copied; the bss is zero; guest
 * writes never reach the file; bad files are refused as by elf_load.
 */
static void test_elf_mapped(void **state)
{
	const size_t page = 4096, a_off = 0x1123, a_len = 3 * 4096 + 0x200, b_off = 0x8000,
		     b_len = 0x2000, total = 0xa000;
	const uint64_t a_paddr = 0x200123, b_paddr = 0x400010;
	uint8_t *file = calloc(1, total), *ram_buf, *ga, *gb, before[64];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)file;
	Elf64_Phdr *ph = (Elf64_Phdr *)(file + sizeof(*eh));
	char dir[PATH_MAX], path[PATH_MAX + 16];
	struct boot_kernel k = { 0 };
	struct vm_ram mem = { 0 };
	char why[WHY_MAX] = "";
	struct fs_map map;
	uint64_t seed = 7;
	int fd;

	(void)state;
	assert_non_null(file);
	elf_header_init(eh, a_paddr + 0x10, 2);
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = a_off, .p_paddr = a_paddr,
			      .p_vaddr = a_paddr, .p_filesz = a_len, .p_memsz = a_len + 0x2000 };
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_offset = b_off, .p_paddr = b_paddr,
			      .p_vaddr = b_paddr, .p_filesz = b_len, .p_memsz = b_len };
	prng_fill(&seed, file + a_off, a_len);
	memset(file + a_off + a_len, 0xaa, b_off - a_off - a_len); /* must not reach the guest */
	prng_fill(&seed, file + b_off, b_len);
	memset(file + b_off + b_len, 0xbb, total - b_off - b_len);

	tmpdir_make(dir);
	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	assert_int_equal(fs_write_file_atomic(path, file, total, 0644), 0);
	ram_buf = mmap(NULL, 8u << 20, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(ram_buf != MAP_FAILED);
	mem = (struct vm_ram){ .map = ram_buf, .size = 8u << 20, .nslots = 1 };
	mem.slot[0] = (struct vm_ram_slot){ .gpa = 0, .size = 8u << 20, .host = ram_buf };

	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fs_map_fd(fd, &map), 0);
	assert_int_equal(elf_load_mapped(map.data, map.len, fd, &mem, BOOT_LINUX64, &k, why,
					 sizeof(why)), 0);
	close(fd);
	fs_unmap(&map);
	assert_int_equal(k.entry, a_paddr + 0x10);

	ga = ram_buf + a_paddr;
	gb = ram_buf + b_paddr;
	assert_memory_equal(ga, file + a_off, a_len);
	for (size_t i = 0; i < 0x2000; i++)
		assert_int_equal(ga[a_len + i], 0);
	assert_memory_equal(gb, file + b_off, b_len);
	assert_int_equal(gb[b_len], 0);
	/* the whole pages of segment A come from the file; segment B was copied */
	assert_true(mapped_from(ga + (page - a_off % page), 2 * page, path));
	assert_false(mapped_from(gb, page, path));

	/* the guest's writes stay in the guest */
	memcpy(before, ga + page, sizeof(before));
	memset(ga + page, 0x77, sizeof(before));
	{
		uint8_t *again;
		size_t n;

		assert_int_equal(fs_read_file(path, &again, &n), 0);
		assert_memory_equal(again + a_off + page, before, sizeof(before));
		free(again);
	}

	/* a file too short for its segment is refused before anything is mapped */
	assert_int_equal(fs_write_file_atomic(path, file, a_off + 100, 0644), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fs_map_fd(fd, &map), 0);
	assert_int_equal(elf_load_mapped(map.data, map.len, fd, &mem, BOOT_LINUX64, &k, why,
					 sizeof(why)),
			 -EINVAL);
	close(fd);
	fs_unmap(&map);

	munmap(ram_buf, 8u << 20);
	free(file);
	rm_rf(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bzimage_parse),
		cmocka_unit_test(test_bzimage_bad),
		cmocka_unit_test(test_decompress_gzip),
		cmocka_unit_test(test_decompress_xz),
		cmocka_unit_test(test_decompress_lz4),
		cmocka_unit_test(test_decompress_zstd),
		cmocka_unit_test(test_decompress_bomb),
		cmocka_unit_test(test_kernel_load_cache),
		cmocka_unit_test(test_kernel_cache_private),
		cmocka_unit_test(test_kernel_fallback),
		cmocka_unit_test(test_elf_bad),
		cmocka_unit_test(test_bzimage_kernel_version),
		cmocka_unit_test(test_elf_inspect),
		cmocka_unit_test(test_kernel_check),
		cmocka_unit_test(test_e820),
		cmocka_unit_test(test_cmdline),
		cmocka_unit_test(test_boot_params),
		cmocka_unit_test(test_pvh_info),
		cmocka_unit_test(test_tables_and_initrd),
		cmocka_unit_test(test_elf_mapped),
	};

	log_set_level(0);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
