/* SPDX-License-Identifier: MIT */
/* lazyblk push: publish a store's chunks (all, or those of some layouts) to a remote. */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../cas/remote/remote.h"
#include "../cas/store.h"
#include "../cas/chunk.h"
#include "../common/first_error.h"
#include "../common/grow.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/refs.h"
#include "cli.h"

static const char push_usage[] =
	"usage: lazyblk push --store DIR --remote URL [IMAGE.layout|IMAGE.manifest ...]\n"
	"              [--fetch-concurrency N] [--fetch-timeout SECS] [--fetch-retries N]\n"
	"\n"
	"Publish chunks to a remote: every chunk of the store, or only those the given layouts\n"
	"or manifests use. Each chunk is verified against its sha256 first (a corrupt chunk is never\n"
	"pushed) and uploaded only if the remote does not have it.\n"
	"\n"
	"  http(s)://HOST[:PORT]/PATH/   PUT PATH/chunks/xx/<sha256> (a WebDAV-enabled web\n"
	"                                server, or any server that accepts PUT)\n"
	"  oci://HOST[:PORT]/REPO[:TAG]  each chunk's zstd frame as a blob of REPO, then an\n"
	"                                image index under TAG (default lazyblk-chunks) that\n"
	"                                maps chunks to blobs, merged with what TAG held\n"
	"\n"
	"options:\n"
	"  -s, --store DIR            the store to publish from\n"
	"      --remote URL           where to (credentials: LAZYBLK_REMOTE_USER and\n"
	"                             LAZYBLK_REMOTE_PASSWORD)\n"
	"      --fetch-concurrency N  uploads at once (default 16)\n"
	"      --fetch-timeout SECS   per request attempt (default 30)\n"
	"      --fetch-retries N      retries of a failed request (default 4)\n"
	"  -h, --help                 this text\n";

struct push_ctx {
	struct store *s;
	struct remote *r;
	uint8_t (*chunks)[SHA256_LEN];
	size_t n, cap;
	size_t next;                       /* atomic */
	int err;                           /* first failure (atomic) */
	uint64_t uploaded, present, bytes; /* atomic */
	uint64_t done;                     /* atomic */
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int add_chunk(struct push_ctx *x, const uint8_t d[SHA256_LEN])
{
	if (!grow_from((void **)&x->chunks, &x->cap, x->n + 1, sizeof(*x->chunks), 1024))
		return -ENOMEM;
	memcpy(x->chunks[x->n++], d, SHA256_LEN);
	return 0;
}

static int collect_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	(void)path;
	return add_chunk(arg, d);
}

/* The chunks the layouts (or manifests) use, without duplicates. */
static int collect_images(struct push_ctx *x, char **paths, int n)
{
	struct chunk_refs refs = { 0 };

	for (int i = 0; i < n; i++) {
		const char *why = NULL;
		int ret = chunk_refs_add_file(&refs, paths[i], &why);

		if (ret) {
			log_error("%s: %s", paths[i], why ? why : strerror(-ret));
			chunk_refs_free(&refs);
			return ret;
		}
	}
	chunk_refs_finish(&refs);
	x->chunks = refs.d;
	x->n = x->cap = refs.n;
	return 0;
}

static void progress(struct push_ctx *x)
{
	if (log_progress_due())
		log_progress("pushing: %llu of %zu chunks",
			     (unsigned long long)__atomic_load_n(&x->done, __ATOMIC_RELAXED), x->n);
}

/* One uploader thread's decompression state, reused from chunk to chunk. */
struct push_scratch {
	struct chunk_codec *codec;
	uint8_t *buf;
	size_t cap;
};

/* Read the chunk once, verify it in memory (a corrupt chunk is never pushed), upload it. */
static int push_one(struct push_ctx *x, struct push_scratch *w, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];
	const char *why = NULL;
	uint8_t *frame;
	uint64_t want;
	size_t len, n;
	int ret;

	sha256_to_hex(d, hex);
	ret = store_read(x->s, d, &frame, &len);
	if (ret == -ENOENT) {
		log_error("chunk %s is not in the store", hex);
		return ret;
	}
	if (ret) {
		log_error("chunk %s: %s", hex, strerror(-ret));
		return ret;
	}
	if (chunk_content_size(frame, len, &want) || want > CHUNK_SIZE_MAX) {
		why = "not a valid zstd chunk";
		ret = -EBADMSG;
	} else if (want > w->cap) {
		uint8_t *nb = realloc(w->buf, want);

		ret = nb ? 0 : -ENOMEM;
		if (nb) {
			w->buf = nb;
			w->cap = want;
		}
	}
	if (!ret)
		ret = chunk_verify(w->codec, d, frame, len, w->buf, w->cap, &n, &why);
	if (ret) {
		free(frame);
		log_error("chunk %s is corrupt in the store (%s): not pushed", hex,
			  why ? why : strerror(-ret));
		return ret;
	}
	ret = remote_put(x->r, d, frame, len);
	free(frame);
	if (ret == 1) {
		__atomic_add_fetch(&x->uploaded, 1, __ATOMIC_RELAXED);
		__atomic_add_fetch(&x->bytes, len, __ATOMIC_RELAXED);
	} else if (ret == 0) {
		__atomic_add_fetch(&x->present, 1, __ATOMIC_RELAXED);
	}
	return ret < 0 ? ret : 0; /* remote_put said why */
}

static void *push_worker(void *arg)
{
	struct push_ctx *x = arg;
	struct push_scratch w = { .codec = chunk_codec_new(0) };

	if (!w.codec) {
		log_error("out of memory");
		first_error_set(&x->err, -ENOMEM);
		return NULL;
	}
	while (!first_error_get(&x->err)) {
		size_t i = __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED);
		int ret;

		if (i >= x->n)
			break;
		ret = push_one(x, &w, x->chunks[i]);
		if (ret)
			first_error_set(&x->err, ret);
		__atomic_add_fetch(&x->done, 1, __ATOMIC_RELAXED);
		progress(x);
	}
	chunk_codec_free(w.codec);
	free(w.buf);
	return NULL;
}

static int push_run(struct push_ctx *x, const struct remote_opts *ro, const char *store_dir,
		    char **layouts, int n_layouts)
{
	unsigned threads = ro->concurrency ? ro->concurrency : REMOTE_CONCURRENCY_DEFAULT, nt = 0;
	pthread_t tids[64];
	const char *why = NULL;
	double t0 = now();
	char h[32];
	int ret;

	ret = store_open(store_dir, false, &x->s);
	if (ret) {
		log_error("%s: %s", store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		return 1;
	}
	ret = n_layouts ? collect_images(x, layouts, n_layouts)
			: store_foreach(x->s, collect_one, x);
	if (ret) {
		if (!n_layouts)
			log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	ret = remote_open(ro, &x->r, &why);
	if (ret) {
		log_error("%s: %s", ro->url, why ? why : strerror(-ret));
		return 1;
	}
	if (threads > 64)
		threads = 64;
	for (; nt < threads && nt < x->n; nt++)
		if (pthread_create(&tids[nt], NULL, push_worker, x))
			break;
	if (x->n && !nt)
		push_worker(x);
	for (unsigned i = 0; i < nt; i++)
		pthread_join(tids[i], NULL);
	log_progress_done();
	if (x->err)
		return 1; /* it said why */
	if (remote_publish(x->r))
		return 1; /* it said why */
	printf("pushed %zu chunks to %s: %llu uploaded (%s), %llu already there, %.2f s\n", x->n,
	       ro->url, (unsigned long long)x->uploaded, size_human(x->bytes, h, sizeof(h)),
	       (unsigned long long)x->present, now() - t0);
	return 0;
}

int cmd_push(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		CLI_REMOTE_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct push_ctx x = { 0 };
	struct cli_remote rem = { 0 };
	struct remote_opts ro = { .push = true };
	const char *store_dir = NULL;
	int c, r, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': store_dir = optarg; break;
		case 'h': fputs(push_usage, stdout); return 0;
		case CLI_O_CACHE_SIZE:
			return cli_usage_error("--cache-size is for serve, export and run");
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("push", argv, c);
		}
	}
	if (!store_dir)
		return cli_usage_error("missing --store DIR (see lazyblk push --help)");
	if (!rem.url)
		return cli_usage_error("missing --remote URL (see lazyblk push --help)");
	ro.url = rem.url;
	ro.concurrency = rem.concurrency;
	ro.timeout_ms = rem.timeout_ms;
	ro.retries = rem.retries;
	log_first_error_only(true); /* uploader threads may fail at once: say it once */
	rc = push_run(&x, &ro, store_dir, argv + optind, argc - optind);
	remote_close(x.r);
	store_close(x.s);
	free(x.chunks);
	return rc;
}
