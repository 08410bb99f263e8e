/* SPDX-License-Identifier: MIT */
/*
 * bzImage: the setup header (Documentation/arch/x86/boot.rst), the compressed payload and
 * its host-side decompression, and the fallback load of the protected-mode kernel.
 */
#include <errno.h>
#include <lz4.h>
#include <lzma.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "../common/le.h"
#include "boot.h"

#define HDR_SETUP_SECTS 0x1f1
#define HDR_BOOT_FLAG 0x1fe
#define HDR_JUMP 0x200
#define HDR_HEADER 0x202
#define HDR_VERSION 0x206
#define HDR_KERNEL_VERSION 0x20e  /* + 0x200: the release string (2.00+) */
#define HDR_LOADFLAGS 0x211
#define HDR_INITRD_ADDR_MAX 0x22c
#define HDR_KERNEL_ALIGNMENT 0x230
#define HDR_XLOADFLAGS 0x236
#define HDR_CMDLINE_SIZE 0x238
#define HDR_PAYLOAD_OFFSET 0x248
#define HDR_PAYLOAD_LENGTH 0x24c
#define HDR_PREF_ADDRESS 0x258
#define HDR_INIT_SIZE 0x260
#define HDR_END_212 0x268       /* the fields a 2.12 header has */

#define XLF_KERNEL_64 0x1
#define BZ_ENTRY64_OFFSET 0x200
#define LZ4_LEGACY_MAGIC 0x184c2102u
#define LZ4_LEGACY_BLOCK (8u << 20)

int bzimage_parse(const uint8_t *buf, size_t len, struct bzimage *bz, char *why,
		  size_t why_len)
{
	size_t sects, off, plen;

	memset(bz, 0, sizeof(*bz));
	if (len < 0x400) {
		why_set(why, why_len, 0, "too short for a bzImage (truncated?)");
		return -EINVAL;
	}
	if (le16_get(buf + HDR_BOOT_FLAG) != 0xaa55 || memcmp(buf + HDR_HEADER, "HdrS", 4)) {
		why_set(why, why_len, 0, "no bzImage setup header (bad magic)");
		return -EINVAL;
	}
	bz->version = le16_get(buf + HDR_VERSION);
	if (bz->version < 0x020c) {
		why_set(why, why_len, 0, "boot protocol older than 2.12 (no 64-bit entry)");
		return -ENOEXEC;
	}
	bz->xloadflags = le16_get(buf + HDR_XLOADFLAGS);
	if (!(bz->xloadflags & XLF_KERNEL_64)) {
		why_set(why, why_len, 0, "not a 64-bit kernel (XLF_KERNEL_64 unset)");
		return -ENOEXEC;
	}
	bz->loadflags = buf[HDR_LOADFLAGS];
	sects = buf[HDR_SETUP_SECTS] ? buf[HDR_SETUP_SECTS] : 4;
	bz->setup_sects = (uint8_t)sects;
	bz->pm_off = (sects + 1) * 512;
	if (bz->pm_off >= len) {
		why_set(why, why_len, 0, "truncated bzImage (no kernel after the setup sectors)");
		return -EINVAL;
	}
	bz->pm_len = len - bz->pm_off;
	bz->hdr_len = HDR_HEADER + buf[HDR_JUMP + 1] - HDR_SETUP_SECTS;
	if (bz->hdr_len < HDR_END_212 - HDR_SETUP_SECTS)
		bz->hdr_len = HDR_END_212 - HDR_SETUP_SECTS;
	if (bz->hdr_len > 0x80)
		bz->hdr_len = 0x80;
	off = le32_get(buf + HDR_PAYLOAD_OFFSET);
	plen = le32_get(buf + HDR_PAYLOAD_LENGTH);
	if (off > bz->pm_len || plen > bz->pm_len - off || plen < 8) {
		why_set(why, why_len, 0, "payload outside the file (truncated or corrupt bzImage)");
		return -EINVAL;
	}
	bz->payload_off = bz->pm_off + off;
	bz->payload_len = plen;
	bz->initrd_addr_max = le32_get(buf + HDR_INITRD_ADDR_MAX);
	bz->kernel_alignment = le32_get(buf + HDR_KERNEL_ALIGNMENT);
	bz->cmdline_size = le32_get(buf + HDR_CMDLINE_SIZE);
	bz->pref_address = le64_get(buf + HDR_PREF_ADDRESS);
	bz->init_size = le32_get(buf + HDR_INIT_SIZE);
	return 0;
}

int bzimage_kernel_version(const uint8_t *buf, size_t len, const char **s, size_t *max,
			   char *why, size_t why_len)
{
	uint16_t proto, off;

	if (len < HDR_KERNEL_VERSION + 2 || memcmp(buf + HDR_HEADER, "HdrS", 4))
		return -ENOENT;
	proto = le16_get(buf + HDR_VERSION);
	off = le16_get(buf + HDR_KERNEL_VERSION);
	if (proto < 0x0200 || !off || (size_t)off + HDR_JUMP >= len) {
		why_set(why, why_len, 0,
			"bzImage has no kernel_version string in its setup header");
		return -ENOEXEC;
	}
	*s = (const char *)buf + off + HDR_JUMP;
	*max = len - off - HDR_JUMP;
	return 0;
}

const char *bzimage_compression(const uint8_t *p, size_t len)
{
	static const struct {
		const char *name;
		uint8_t magic[6];
		size_t n;
	} m[] = {
		{ "gzip", { 0x1f, 0x8b }, 2 },
		{ "xz", { 0xfd, '7', 'z', 'X', 'Z', 0 }, 6 },
		{ "lz4", { 0x02, 0x21, 0x4c, 0x18 }, 4 },
		{ "zstd", { 0x28, 0xb5, 0x2f, 0xfd }, 4 },
		{ "bzip2", { 'B', 'Z', 'h' }, 3 },
		{ "lzma", { 0x5d, 0, 0 }, 3 },
		{ "lzo", { 0x89, 'L', 'Z', 'O' }, 4 },
	};

	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (len >= m[i].n && !memcmp(p, m[i].magic, m[i].n))
			return m[i].name;
	return NULL;
}

/* Each decoder fills out[0..cap) and sets *n; cap is one byte more than declared. */
static int bz_gunzip(const uint8_t *p, size_t len, uint8_t *out, size_t cap, size_t *n)
{
	z_stream z = { 0 };
	int ret;

	if (len > UINT32_MAX || cap > UINT32_MAX || inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
		return -EBADMSG;
	z.next_in = (Bytef *)p;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ret = inflate(&z, Z_FINISH);
	*n = z.total_out;
	inflateEnd(&z);
	return ret == Z_STREAM_END ? 0 : -EBADMSG;
}

static int bz_unxz(const uint8_t *p, size_t len, uint8_t *out, size_t cap, size_t *n)
{
	lzma_stream s = LZMA_STREAM_INIT;
	lzma_ret ret;

	if (lzma_stream_decoder(&s, 256u << 20, 0) != LZMA_OK)
		return -ENOMEM;
	s.next_in = p;
	s.avail_in = len;
	s.next_out = out;
	s.avail_out = cap;
	do
		ret = lzma_code(&s, LZMA_FINISH);
	while (ret == LZMA_OK && s.avail_out);
	*n = s.total_out;
	lzma_end(&s);
	return ret == LZMA_STREAM_END ? 0 : -EBADMSG;
}

/* The LZ4 legacy frame: magic, then blocks of (le32 compressed size, data), ≤ 8 MiB each. */
static int bz_unlz4(const uint8_t *p, size_t len, uint8_t *out, size_t cap, size_t *n)
{
	size_t pos = 4, o = 0;
	uint32_t c;
	int r;

	while (len - pos >= 4) {
		c = le32_get(p + pos);
		if (c == LZ4_LEGACY_MAGIC) {
			pos += 4;
			continue;
		}
		if (len - pos == 4 && o + 1 == cap)
			break; /* the size Linux appends */
		pos += 4;
		if (c > len - pos || c > (uint32_t)LZ4_compressBound(LZ4_LEGACY_BLOCK))
			return -EBADMSG;
		r = LZ4_decompress_safe((const char *)p + pos, (char *)out + o, (int)c,
					(int)(cap - o < LZ4_LEGACY_BLOCK ? cap - o : LZ4_LEGACY_BLOCK));
		if (r < 0)
			return -EBADMSG;
		o += (size_t)r;
		pos += c;
	}
	*n = o;
	return 0;
}

static int bz_unzstd(const uint8_t *p, size_t len, uint8_t *out, size_t cap, size_t *n)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	ZSTD_inBuffer in = { p, len, 0 };
	ZSTD_outBuffer ob = { out, cap, 0 };
	size_t r = 1, last_in, last_out;
	int ret = -EBADMSG;

	if (!d)
		return -ENOMEM;
	ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 31);
	for (;;) {
		last_in = in.pos;
		last_out = ob.pos;
		r = ZSTD_decompressStream(d, &ob, &in);
		if (ZSTD_isError(r))
			break;
		if (!r) {
			ret = 0;
			break;
		}
		if ((in.pos == last_in && ob.pos == last_out) || ob.pos == ob.size)
			break;
	}
	*n = ob.pos;
	ZSTD_freeDCtx(d);
	return ret;
}

int bzimage_decompress(const uint8_t *p, size_t len, size_t limit, uint8_t **out,
		       size_t *out_len, char *why, size_t why_len)
{
	const char *name = bzimage_compression(p, len);
	int (*dec)(const uint8_t *, size_t, uint8_t *, size_t, size_t *) = NULL;
	uint32_t declared;
	uint8_t *buf;
	size_t n = 0;
	int ret;

	*out = NULL;
	if (!name) {
		why_set(why, why_len, 0, "unknown payload compression");
		return -EPROTONOSUPPORT;
	}
	if (!strcmp(name, "gzip"))
		dec = bz_gunzip;
	else if (!strcmp(name, "xz"))
		dec = bz_unxz;
	else if (!strcmp(name, "lz4"))
		dec = bz_unlz4;
	else if (!strcmp(name, "zstd"))
		dec = bz_unzstd;
	if (!dec) {
		why_set(why, why_len, 0,
			"payload compression not supported here (bzip2, lzma or lzo)");
		return -EPROTONOSUPPORT;
	}
	if (len < 8) {
		why_set(why, why_len, 0, "payload too short");
		return -EBADMSG;
	}
	declared = le32_get(p + len - 4);
	if (!declared) {
		why_set(why, why_len, 0, "payload declares an empty kernel");
		return -EBADMSG;
	}
	if (declared > limit) {
		why_set(why, why_len, 0,
			"payload declares a kernel larger than the decompression limit");
		return -EFBIG;
	}
	/* one spare byte: output past the declared size is caught, never written beyond */
	buf = malloc((size_t)declared + 1);
	if (!buf) {
		why_set(why, why_len, 0, "out of memory");
		return -ENOMEM;
	}
	ret = dec(p, len, buf, (size_t)declared + 1, &n);
	if (n > declared) {
		why_set(why, why_len, 0, "payload decompresses to more than its declared size");
		ret = -EFBIG;
	} else if (!ret && n != declared) {
		why_set(why, why_len, 0, "payload decompresses to less than its declared size");
		ret = -EBADMSG;
	} else if (ret) {
		why_set(why, why_len, 0, "%s",
			ret == -ENOMEM ? "out of memory" : "corrupt or truncated payload");
	}
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	*out_len = n;
	return 0;
}

int bzimage_load_pm(const uint8_t *buf, size_t len, const struct bzimage *bz,
		    const struct vm_ram *ram, struct boot_kernel *k, char *why, size_t why_len)
{
	uint64_t at = bz->pref_address >= BOOT_HIMEM_ADDR ? bz->pref_address : 0x1000000;
	uint64_t need = bz->init_size > bz->pm_len ? bz->init_size : bz->pm_len;
	uint8_t *dst = vm_ram_ptr(ram, at, need);

	(void)len;
	if (!dst) {
		why_set(why, why_len, 0,
			"the kernel does not fit in guest RAM at its preferred address (more --mem)");
		return -ENOSPC;
	}
	memcpy(dst, buf + bz->pm_off, bz->pm_len);
	k->entry = at + BZ_ENTRY64_OFFSET;
	k->lo = at;
	k->hi = at + need;
	return 0;
}
