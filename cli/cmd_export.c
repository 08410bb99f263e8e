/* SPDX-License-Identifier: MIT */
/* lazyblk export: every block of a layout, through the engine's read path, into a raw disk. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../blkd/engine/engine.h"
#include "../blkd/engine/reader.h"
#include "../cas/source.h"
#include "../common/fsutil.h"
#include "../common/grow.h"
#include "../common/first_error.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/layout.h"
#include "cli.h"

#define EXPORT_PIECE ((size_t)4 << 20) /* bytes read through the engine at a time */

static const char export_usage[] =
	"usage: lazyblk export IMAGE.layout --store DIR -o DISK.raw\n"
	"              [--remote URL [--cache-size BYTES]] [--fetch-concurrency N]\n"
	"              [--fetch-timeout SECS] [--fetch-retries N]\n"
	"\n"
	"Materialize every block of a layout into a raw disk image of the layout's size:\n"
	"metadata blocks from the layout, data blocks from the store's chunks (each chunk\n"
	"verified against its sha256), zeros elsewhere. All-zero blocks are not written, so\n"
	"DISK.raw is sparse. It is written to DISK.raw.tmp.XXXXXX, made durable and renamed\n"
	"into place, so DISK.raw is either complete or untouched.\n"
	"\n"
	"options:\n"
	"  -s, --store DIR         the chunk store holding the image's chunks (with --remote:\n"
	"                          the local cache, created if missing)\n"
	"  -o, --output FILE       the raw disk image to write\n"
	"%s"
	"  -h, --help              this text\n";

/* A piece of the disk to read: blocks [b, b + n), n <= EXPORT_PIECE / LAYOUT_BLOCK. */
struct piece {
	uint64_t b;
	uint32_t n;
};

/* Pieces are read by several threads (chunk loads, and remote fetches, overlap). */
struct export_ctx {
	const struct layout *l;
	struct blkd_reader *r;
	const char *out;
	int fd;
	struct piece *pieces;
	size_t n_pieces;
	size_t next;                   /* the next piece to take (atomic) */
	int err;                       /* the first failure (atomic); the others stop */
	uint64_t written;              /* bytes of non-zero blocks written (atomic) */
	uint64_t mapped, done;         /* bytes of the disk the runs cover; read so far (atomic) */
	double start;
};

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static bool block_is_zero(const uint8_t *b)
{
	return b[0] == 0 && !memcmp(b, b + 1, LAYOUT_BLOCK - 1);
}

static int pwrite_full(int fd, const uint8_t *p, size_t len, uint64_t off)
{
	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * The walk over the layout in disk order: metadata runs and data runs merged into
 * ranges of blocks that hold anything but zeros; gaps between them are never read.
 */
struct walk {
	const struct layout *l;
	size_t im, id;
};

/* The next run in disk order as blocks [*s, *e); false at the end. */
static bool walk_peek(const struct walk *w, uint64_t *s, uint64_t *e, bool *is_data)
{
	const struct layout *l = w->l;
	bool meta = w->im < l->hdr.meta_run_count, data = w->id < l->hdr.data_run_count;
	uint64_t pos = 0, ds = 0;

	if (data) {
		pos = layout_data_run_pos(&l->data_runs[w->id]);
		ds = pos / LAYOUT_BLOCK;
	}
	if (meta && (!data || l->meta_runs[w->im].lba < ds)) {
		*s = l->meta_runs[w->im].lba;
		*e = *s + l->meta_runs[w->im].count;
		*is_data = false;
		return true;
	}
	if (!data)
		return false;
	*s = ds;
	*e = (pos + l->data_runs[w->id].len + LAYOUT_BLOCK - 1) / LAYOUT_BLOCK;
	*is_data = true;
	return true;
}

/* The next range of blocks [*first, *end) that runs cover without a gap. */
static bool walk_next(struct walk *w, uint64_t *first, uint64_t *end)
{
	uint64_t s, e;
	bool is_data;

	if (!walk_peek(w, first, end, &is_data))
		return false;
	for (;;) {
		if (is_data)
			w->id++;
		else
			w->im++;
		if (!walk_peek(w, &s, &e, &is_data) || s > *end)
			return true;
		if (e > *end)
			*end = e;
	}
}

static void progress(struct export_ctx *x)
{
	char h1[32], h2[32];
	uint64_t done;

	if (!log_progress_due())
		return;
	done = __atomic_load_n(&x->done, __ATOMIC_RELAXED);
	log_progress("exporting: %llu%% (%s of %s)",
		     (unsigned long long)(done * 100 / (x->mapped ? x->mapped : 1)),
		     size_human(done, h1, sizeof(h1)), size_human(x->mapped, h2, sizeof(h2)));
}

/* Read one piece through the engine and write its non-zero blocks. */
static int export_piece(struct export_ctx *x, const struct piece *p, uint8_t *buf)
{
	int ret = blkd_reader_read(x->r, p->b * LAYOUT_BLOCK, buf, (size_t)p->n * LAYOUT_BLOCK);

	if (ret)
		return ret; /* the reader said why */
	for (size_t i = 0; i < p->n;) {
		size_t k;

		if (block_is_zero(buf + i * LAYOUT_BLOCK)) {
			i++;
			continue;
		}
		for (k = i + 1; k < p->n && !block_is_zero(buf + k * LAYOUT_BLOCK); k++)
			;
		ret = pwrite_full(x->fd, buf + i * LAYOUT_BLOCK, (k - i) * LAYOUT_BLOCK,
				  (p->b + i) * LAYOUT_BLOCK);
		if (ret) {
			log_error("%s: %s", x->out, strerror(-ret));
			return ret;
		}
		__atomic_add_fetch(&x->written, (k - i) * LAYOUT_BLOCK, __ATOMIC_RELAXED);
		i = k;
	}
	__atomic_add_fetch(&x->done, (uint64_t)p->n * LAYOUT_BLOCK, __ATOMIC_RELAXED);
	progress(x);
	return 0;
}

static void *export_worker(void *arg)
{
	struct export_ctx *x = arg;
	uint8_t *buf = malloc(EXPORT_PIECE);

	if (!buf) {
		log_error("out of memory");
		first_error_set(&x->err, -ENOMEM);
		return NULL;
	}
	while (!first_error_get(&x->err)) {
		size_t i = __atomic_fetch_add(&x->next, 1, __ATOMIC_RELAXED);
		int ret;

		if (i >= x->n_pieces)
			break;
		ret = export_piece(x, &x->pieces[i], buf);
		if (ret)
			first_error_set(&x->err, ret);
	}
	free(buf);
	return NULL;
}

/* Cut the ranges that hold anything into pieces, then read them with `threads` threads. */
static int export_all(struct export_ctx *x, unsigned threads)
{
	struct walk w = { x->l, 0, 0 };
	const uint64_t per = EXPORT_PIECE / LAYOUT_BLOCK;
	pthread_t tids[64];
	uint64_t first, end;
	size_t cap = 0;
	unsigned n = 0;

	while (walk_next(&w, &first, &end)) {
		x->mapped += (end - first) * LAYOUT_BLOCK;
		for (uint64_t b = first; b < end; b += per) {
			if (!grow_from((void **)&x->pieces, &cap, x->n_pieces + 1,
				       sizeof(*x->pieces), 256)) {
				log_error("out of memory");
				return -ENOMEM;
			}
			x->pieces[x->n_pieces].b = b;
			x->pieces[x->n_pieces].n = (uint32_t)(end - b < per ? end - b : per);
			x->n_pieces++;
		}
	}
	if (threads > 64)
		threads = 64;
	for (; n < threads && n < x->n_pieces; n++)
		if (pthread_create(&tids[n], NULL, export_worker, x))
			break;
	if (x->n_pieces && !n)
		export_worker(x);
	for (unsigned i = 0; i < n; i++)
		pthread_join(tids[i], NULL);
	return x->err;
}

/* Write the whole image into a temporary file next to out, then rename it into place. */
static int export_to(struct export_ctx *x, const char *out, unsigned threads)
{
	char tmp[PATH_MAX], dir[PATH_MAX];
	int ret;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", out) >= (int)sizeof(tmp)) {
		log_error("%s: %s", out, strerror(ENAMETOOLONG));
		return -ENAMETOOLONG;
	}
	x->fd = mkostemp(tmp, O_CLOEXEC);
	if (x->fd < 0) {
		ret = -errno;
		log_error("%s: %s", out, strerror(-ret));
		return ret;
	}
	if (ftruncate(x->fd, (off_t)blkd_reader_size(x->r)) < 0) {
		ret = -errno;
		log_error("%s: %s", out, strerror(-ret));
	} else {
		ret = export_all(x, threads);
		log_progress_done();
	}
	if (!ret && (fchmod(x->fd, 0644) < 0 || fsync(x->fd) < 0)) {
		ret = -errno;
		log_error("%s: %s", out, strerror(-ret));
	}
	if (close(x->fd) < 0 && !ret) {
		ret = -errno;
		log_error("%s: %s", out, strerror(-ret));
	}
	if (!ret && rename(tmp, out) < 0) {
		ret = -errno;
		log_error("%s: %s", out, strerror(-ret));
	}
	if (ret) {
		unlink(tmp);
		return ret;
	}
	fs_dirname(out, dir, sizeof(dir));
	ret = fs_fsync_dir(dir);
	if (ret)
		log_error("%s: %s", dir, strerror(-ret));
	return ret;
}

static int export_run(const char *path, const struct cas_source_opts *so, const char *out)
{
	struct export_ctx x = { .out = out };
	struct blkd_reader_stats st;
	struct cas_source_stats cs;
	struct cas_source *src = NULL;
	struct layout *l = NULL;
	const char *why = NULL;
	char h1[32], h2[32];
	unsigned threads;
	long cpus;
	int ret;

	ret = layout_open(path, &l, &why);
	if (ret) {
		log_error("%s: %s", path, why ? why : strerror(-ret));
		return 1;
	}
	if (cas_source_open(so, &src)) {
		layout_close(l); /* it said why */
		return 1;
	}
	/* remote fetches overlap best with one reader per request in flight */
	cpus = sysconf(_SC_NPROCESSORS_ONLN);
	threads = so->remote_url ? (so->concurrency ? so->concurrency : REMOTE_CONCURRENCY_DEFAULT)
				 : (unsigned)(cpus > 1 ? (cpus < 8 ? cpus : 8) : 1);
	x.l = l;
	x.start = now();
	ret = blkd_reader_new(l, src, 0, &x.r);
	if (ret)
		log_error("%s", strerror(-ret));
	else
		ret = export_to(&x, out, threads);
	if (!ret) {
		blkd_reader_stats(x.r, &st);
		printf("exported %s to %s: %s disk, %s of non-zero blocks, %llu chunks, %.2f s\n",
		       path, out, size_human(blkd_reader_size(x.r), h1, sizeof(h1)),
		       size_human(x.written, h2, sizeof(h2)), (unsigned long long)st.chunk_loads,
		       now() - x.start);
		if (so->remote_url) {
			cas_source_get_stats(src, &cs);
			blkd_engine_print_cas_stats(&cs, stdout);
		}
	}
	blkd_reader_free(x.r);
	free(x.pieces);
	cas_source_close(src);
	layout_close(l);
	return ret ? 1 : 0;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		CLI_REMOTE_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct cli_remote rem = { 0 };
	struct cas_source_opts so = { 0 };
	const char *out = NULL;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': so.store_dir = optarg; break;
		case 'o': out = optarg; break;
		case 'h': printf(export_usage, cli_remote_help); return 0;
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("export", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.layout (see lazyblk export --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!so.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!out)
		return cli_usage_error("missing -o DISK.raw");
	if (cli_remote_check(&rem))
		return EXIT_USAGE;
	cli_remote_to_source(&rem, &so);
	so.no_plain = true; /* an artifact: every chunk verified, no plain copies made */
	log_first_error_only(true); /* reader threads may fail at once: say it once */
	return export_run(argv[optind], &so, out);
}
