/* SPDX-License-Identifier: MIT */
/* lazyblk export: every block of a layout, through the engine's read path, into a raw disk. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../blkd/reader.h"
#include "../cas/store.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/layout.h"
#include "cli.h"

#define EXPORT_PIECE ((size_t)4 << 20) /* bytes read through the engine at a time */

static const char export_usage[] =
	"usage: lazyblk export IMAGE.layout --store DIR -o DISK.raw\n"
	"\n"
	"Materialize every block of a layout into a raw disk image of the layout's size:\n"
	"metadata blocks from the layout, data blocks from the store's chunks (each chunk\n"
	"verified against its sha256), zeros elsewhere. All-zero blocks are not written, so\n"
	"DISK.raw is sparse. It is written to DISK.raw.tmp.XXXXXX, made durable and renamed\n"
	"into place, so DISK.raw is either complete or untouched.\n"
	"\n"
	"options:\n"
	"  -s, --store DIR     the chunk store holding the image's chunks\n"
	"  -o, --output FILE   the raw disk image to write\n"
	"  -h, --help          this text\n";

struct export_ctx {
	const struct layout *l;
	struct blkd_reader *r;
	int fd;
	uint8_t *buf;
	uint64_t written;              /* bytes of non-zero blocks written */
	uint64_t mapped, done;         /* bytes of the disk the runs cover; read so far */
	double start, last_progress;
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
	double t = now();

	if (!log_progress_enabled() || t - x->last_progress < 0.1)
		return;
	x->last_progress = t;
	log_progress("exporting: %llu%% (%s of %s)",
		     (unsigned long long)(x->done * 100 / (x->mapped ? x->mapped : 1)),
		     size_human(x->done, h1, sizeof(h1)), size_human(x->mapped, h2, sizeof(h2)));
}

/* Read blocks [first, end) through the engine and write the non-zero ones. */
static int export_range(struct export_ctx *x, uint64_t first, uint64_t end, const char *out)
{
	for (uint64_t b = first; b < end;) {
		size_t n = end - b < EXPORT_PIECE / LAYOUT_BLOCK ? (size_t)(end - b)
								  : EXPORT_PIECE / LAYOUT_BLOCK;
		int ret = blkd_reader_read(x->r, b * LAYOUT_BLOCK, x->buf, n * LAYOUT_BLOCK);

		if (ret)
			return ret; /* the reader said why */
		for (size_t i = 0; i < n;) {
			size_t k;

			if (block_is_zero(x->buf + i * LAYOUT_BLOCK)) {
				i++;
				continue;
			}
			for (k = i + 1; k < n && !block_is_zero(x->buf + k * LAYOUT_BLOCK); k++)
				;
			ret = pwrite_full(x->fd, x->buf + i * LAYOUT_BLOCK, (k - i) * LAYOUT_BLOCK,
					  (b + i) * LAYOUT_BLOCK);
			if (ret) {
				log_error("%s: %s", out, strerror(-ret));
				return ret;
			}
			x->written += (k - i) * LAYOUT_BLOCK;
			i = k;
		}
		b += n;
		x->done += n * LAYOUT_BLOCK;
		progress(x);
	}
	return 0;
}

static int export_all(struct export_ctx *x, const char *out)
{
	struct walk w = { x->l, 0, 0 };
	uint64_t first, end;
	int ret;

	while (walk_next(&w, &first, &end))
		x->mapped += (end - first) * LAYOUT_BLOCK;
	w = (struct walk){ x->l, 0, 0 };
	while (walk_next(&w, &first, &end)) {
		ret = export_range(x, first, end, out);
		if (ret)
			return ret;
	}
	return 0;
}

/* Write the whole image into a temporary file next to out, then rename it into place. */
static int export_to(struct export_ctx *x, const char *out)
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
		ret = export_all(x, out);
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

static int export_run(const char *path, const char *store_dir, const char *out)
{
	struct export_ctx x = { 0 };
	struct blkd_reader_stats st;
	struct layout *l = NULL;
	struct store *s = NULL;
	const char *why = NULL;
	char h1[32], h2[32];
	int ret;

	ret = layout_open(path, &l, &why);
	if (ret) {
		log_error("%s: %s", path, why ? why : strerror(-ret));
		return 1;
	}
	ret = store_open(store_dir, false, &s);
	if (ret) {
		log_error("%s: %s", store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		layout_close(l);
		return 1;
	}
	x.l = l;
	x.start = now();
	x.buf = malloc(EXPORT_PIECE);
	ret = x.buf ? blkd_reader_new(l, s, 0, &x.r) : -ENOMEM;
	if (ret)
		log_error("%s", strerror(-ret));
	else
		ret = export_to(&x, out);
	if (!ret) {
		blkd_reader_stats(x.r, &st);
		printf("exported %s to %s: %s disk, %s of non-zero blocks, %llu chunks, %.2f s\n",
		       path, out, size_human(blkd_reader_size(x.r), h1, sizeof(h1)),
		       size_human(x.written, h2, sizeof(h2)), (unsigned long long)st.chunk_loads,
		       now() - x.start);
	}
	blkd_reader_free(x.r);
	free(x.buf);
	store_close(s);
	layout_close(l);
	return ret ? 1 : 0;
}

int cmd_export(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *store_dir = NULL, *out = NULL;
	int c;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:o:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': store_dir = optarg; break;
		case 'o': out = optarg; break;
		case 'h': fputs(export_usage, stdout); return 0;
		default: return cli_bad_option("export", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.layout (see lazyblk export --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!store_dir)
		return cli_usage_error("missing --store DIR");
	if (!out)
		return cli_usage_error("missing -o DISK.raw");
	return export_run(argv[optind], store_dir, out);
}
