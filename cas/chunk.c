/* SPDX-License-Identifier: MIT */
#include "chunk.h"

#include <errno.h>
#include <string.h>
#include <stdint.h>
#include <stdlib.h>

#include <zstd.h>

#include "../common/le.h"

struct chunk_codec {
	ZSTD_CCtx *cctx;
	ZSTD_DCtx *dctx;
	int level;
};

struct chunk_codec *chunk_codec_new(int level)
{
	struct chunk_codec *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->level = level;
	return c;
}

void chunk_codec_free(struct chunk_codec *c)
{
	if (!c)
		return;
	ZSTD_freeCCtx(c->cctx);
	ZSTD_freeDCtx(c->dctx);
	free(c);
}

size_t chunk_compress_bound(size_t len)
{
	return ZSTD_compressBound(len);
}

int chunk_compress(struct chunk_codec *c, const void *src, size_t len, void *dst, size_t cap,
		   size_t *out_len)
{
	size_t r;

	if (!c->cctx) {
		c->cctx = ZSTD_createCCtx();
		if (!c->cctx)
			return -ENOMEM;
		ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_compressionLevel, c->level);
		ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_contentSizeFlag, 1);
		ZSTD_CCtx_setParameter(c->cctx, ZSTD_c_checksumFlag, 0);
	}
	r = ZSTD_compress2(c->cctx, dst, cap, src, len);
	if (ZSTD_isError(r))
		return -EIO;
	*out_len = r;
	return 0;
}

int chunk_content_size(const void *src, size_t len, uint64_t *size)
{
	const uint8_t *p = src;
	unsigned long long n;

	/* a real zstd frame, not a skippable one (which would "contain" 0 bytes) */
	if (len < 4 || le32_get(p) != ZSTD_MAGICNUMBER)
		return -EBADMSG;
	n = ZSTD_getFrameContentSize(src, len);
	if (n == ZSTD_CONTENTSIZE_UNKNOWN || n == ZSTD_CONTENTSIZE_ERROR)
		return -EBADMSG;
	*size = n;
	return 0;
}

int chunk_decompress(struct chunk_codec *c, const void *src, size_t len, void *dst, size_t cap,
		     size_t *out_len)
{
	uint64_t want;
	size_t r;

	if (chunk_content_size(src, len, &want) || want > cap)
		return -EBADMSG;
	r = ZSTD_findFrameCompressedSize(src, len);
	if (ZSTD_isError(r) || r != len)
		return -EBADMSG;
	if (!c->dctx) {
		c->dctx = ZSTD_createDCtx();
		if (!c->dctx)
			return -ENOMEM;
	}
	r = ZSTD_decompressDCtx(c->dctx, dst, cap, src, len);
	if (ZSTD_isError(r) || r != want)
		return -EBADMSG;
	*out_len = r;
	return 0;
}

int chunk_verify(struct chunk_codec *c, const uint8_t d[SHA256_LEN], const void *frame,
		 size_t len, void *dst, size_t cap, size_t *out_len,
		 char *why, size_t why_len)
{
	uint8_t sum[SHA256_LEN];
	size_t n;
	int ret;

	ret = chunk_decompress(c, frame, len, dst, cap, &n);
	if (ret == -EBADMSG)
		why_set(why, why_len, ret, "not a valid zstd chunk");
	if (!ret)
		ret = sha256_buf(dst, n, sum);
	if (ret)
		return ret;
	if (memcmp(sum, d, SHA256_LEN)) {
		return why_set(why, why_len, -EBADMSG, "content does not match its sha256 name");
	}
	*out_len = n;
	return 0;
}
