/* SPDX-License-Identifier: MIT */
/* Decoders shared by the tiers that hold zstd frames (store, remote), and the decode. */
#include "../tier.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "../chunk.h"

#define CODECS_IDLE 32  /* decoders kept for reuse (one per concurrent load is enough) */

/* Idle zstd decoders: a new one per chunk would allocate and fault in its tables. */
struct tier_codecs {
	pthread_mutex_t lock;
	struct chunk_codec *idle[CODECS_IDLE];
	unsigned n;
};

int tier_codecs_new(struct tier_codecs **out)
{
	struct tier_codecs *p = calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	*out = p;
	return 0;
}

void tier_codecs_free(struct tier_codecs *p)
{
	if (!p)
		return;
	while (p->n)
		chunk_codec_free(p->idle[--p->n]);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

/* An idle decoder, or a new one (NULL: out of memory). */
static struct chunk_codec *codec_take(struct tier_codecs *p)
{
	struct chunk_codec *c = NULL;

	pthread_mutex_lock(&p->lock);
	if (p->n)
		c = p->idle[--p->n];
	pthread_mutex_unlock(&p->lock);
	return c ? c : chunk_codec_new(0);
}

static void codec_give(struct tier_codecs *p, struct chunk_codec *c)
{
	pthread_mutex_lock(&p->lock);
	if (c && p->n < CODECS_IDLE) {
		p->idle[p->n++] = c;
		c = NULL;
	}
	pthread_mutex_unlock(&p->lock);
	chunk_codec_free(c);
}

int tier_decode(struct tier_codecs *p, const uint8_t d[SHA256_LEN], const uint8_t *frame,
		size_t flen, size_t max, size_t head, void **block, size_t *len, char *why,
		size_t why_len)
{
	struct chunk_codec *codec;
	uint64_t want;
	uint8_t *b;
	int ret;

	if (chunk_content_size(frame, flen, &want))
		return why_set(why, why_len, -EBADMSG, "not a valid zstd chunk");
	if (want > max)
		return why_set(why, why_len, -EBADMSG, "larger than the chunk size");
	b = malloc(head + (want ? want : 1));
	if (!b)
		return -ENOMEM;
	codec = codec_take(p);
	ret = codec ? chunk_verify(codec, d, frame, flen, b + head, want, len, why,
					     why_len) : -ENOMEM;
	codec_give(p, codec);
	if (ret) {
		free(b);
		return ret;
	}
	*block = b;
	return 0;
}
