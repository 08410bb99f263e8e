/* SPDX-License-Identifier: MIT */
/* lazyblk export (file_export.h): the layout walked in disk order, pieces read on a workq
 * through the disk. */
#include "file_export.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../cas/remote/remote.h"
#include "../../common/clock.h"
#include "../../common/fsutil.h"
#include "../../common/grow.h"
#include "../../common/workq.h"
#include "../../layout/layout.h"

#define EXPORT_PIECE ((size_t)4 << 20) /* bytes read through the disk at a time */
#define EXPORT_THREADS_MAX 64

/* A piece of the disk to read: blocks [b, b + n), n <= EXPORT_PIECE / DISK_BLOCK. */
struct piece {
	struct workq_item item;  /* first: the item is the piece */
	uint64_t b;
	uint32_t n;
};

struct export_ctx {
	const struct blkd_export_opts *o;
	const struct layout *l;        /* the image disk's (disk_layout) */
	struct disk d;
	int fd;
	struct piece *pieces;
	size_t n_pieces;
	uint64_t mapped;
	uint64_t written, done;        /* bytes (atomic) */
	pthread_mutex_t lock;          /* err and why */
	int err;                       /* the first failure (read atomically); the others stop */
	char *why;
	size_t why_len;
};

static void set_whyv(char *why, size_t len, const char *fmt, va_list ap)
{
	if (len)
		vsnprintf(why, len, fmt, ap);
}

/* Keep the first failure and its reason (fmt NULL: the layers below said why). */
static void export_fail(struct export_ctx *x, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void export_fail(struct export_ctx *x, int err, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&x->lock);
	if (!x->err) {
		__atomic_store_n(&x->err, err, __ATOMIC_RELAXED);
		if (fmt) {
			va_start(ap, fmt);
			set_whyv(x->why, x->why_len, fmt, ap);
			va_end(ap);
		}
	}
	pthread_mutex_unlock(&x->lock);
}

/* A failure of a file: "PATH: strerror". */
static void export_fail_file(struct export_ctx *x, int err, const char *path)
{
	export_fail(x, err, "%s: %s", path, strerror(-err));
}

static bool block_is_zero(const uint8_t *b)
{
	return b[0] == 0 && !memcmp(b, b + 1, DISK_BLOCK - 1);
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
		ds = pos / DISK_BLOCK;
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
	*e = (pos + l->data_runs[w->id].len + DISK_BLOCK - 1) / DISK_BLOCK;
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

/* Cut the ranges that hold anything into pieces. */
static int export_plan(struct export_ctx *x)
{
	struct walk w = { x->l, 0, 0 };
	const uint64_t per = EXPORT_PIECE / DISK_BLOCK;
	uint64_t first, end;
	size_t cap = 0;

	while (walk_next(&w, &first, &end)) {
		x->mapped += (end - first) * DISK_BLOCK;
		for (uint64_t b = first; b < end; b += per) {
			if (!grow_from((void **)&x->pieces, &cap, x->n_pieces + 1,
				       sizeof(*x->pieces), 256))
				return -ENOMEM;
			x->pieces[x->n_pieces] = (struct piece){
				.b = b, .n = (uint32_t)(end - b < per ? end - b : per) };
			x->n_pieces++;
		}
	}
	return 0;
}

/* Read one piece through the disk and write its non-zero blocks. */
static int export_piece(struct export_ctx *x, const struct piece *p, uint8_t *buf)
{
	int ret = disk_read(&x->d, p->b * DISK_BLOCK, p->n * DISK_BLOCK, buf);

	if (ret) {
		export_fail(x, ret, NULL); /* the chunk tiers said why */
		return ret;
	}
	for (size_t i = 0; i < p->n;) {
		size_t k;

		if (block_is_zero(buf + i * DISK_BLOCK)) {
			i++;
			continue;
		}
		for (k = i + 1; k < p->n && !block_is_zero(buf + k * DISK_BLOCK); k++)
			;
		ret = fs_pwrite_full(x->fd, buf + i * DISK_BLOCK, (k - i) * DISK_BLOCK,
				     (off_t)((p->b + i) * DISK_BLOCK));
		if (ret) {
			export_fail_file(x, ret, x->o->out_path);
			return ret;
		}
		__atomic_add_fetch(&x->written, (k - i) * DISK_BLOCK, __ATOMIC_RELAXED);
		i = k;
	}
	return 0;
}

static void *piece_buf_new(void *ctx)
{
	(void)ctx;
	return malloc(EXPORT_PIECE);
}

static void piece_buf_free(void *buf, void *ctx)
{
	(void)ctx;
	free(buf);
}

static void piece_run(struct workq_item *it, void *ctx, void *buf)
{
	struct export_ctx *x = ctx;
	const struct piece *p = (const struct piece *)it;
	uint64_t done;

	if (__atomic_load_n(&x->err, __ATOMIC_RELAXED))
		return; /* stopping at the first failure */
	if (x->o->cancel && __atomic_load_n(x->o->cancel, __ATOMIC_RELAXED)) {
		export_fail(x, -ECANCELED, "interrupted");
		return;
	}
	if (!buf) {
		export_fail(x, -ENOMEM, "out of memory");
		return;
	}
	if (export_piece(x, p, buf))
		return;
	done = __atomic_add_fetch(&x->done, (uint64_t)p->n * DISK_BLOCK, __ATOMIC_RELAXED);
	if (x->o->progress)
		x->o->progress(x->o->progress_arg, done, x->mapped);
}

static unsigned export_threads(const struct blkd_export_opts *o)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned n = o->threads;

	/* remote fetches overlap best with one reader per request in flight */
	if (!n && o->disk.tiers.remote_url)
		n = o->disk.tiers.concurrency ? o->disk.tiers.concurrency
					      : REMOTE_CONCURRENCY_DEFAULT;
	if (!n)
		n = (unsigned)(cpus > 1 ? (cpus < 8 ? cpus : 8) : 1);
	return n < EXPORT_THREADS_MAX ? n : EXPORT_THREADS_MAX;
}

/* Every piece on a workq; the first failure stops the rest. */
static int export_all(struct export_ctx *x)
{
	static const struct workq_local wl = { piece_buf_new, piece_buf_free, piece_run };
	unsigned threads = export_threads(x->o);
	struct workq *q;
	int ret;

	ret = export_plan(x);
	if (ret) {
		export_fail(x, ret, "out of memory");
		return ret;
	}
	if (!x->n_pieces)
		return 0;
	ret = workq_new_local(threads < x->n_pieces ? threads : (unsigned)x->n_pieces, 0, &wl, x,
			      &q);
	if (ret) {
		export_fail(x, ret, "cannot start the readers: %s", strerror(-ret));
		return ret;
	}
	for (size_t i = 0; i < x->n_pieces && !ret; i++)
		ret = workq_push(q, &x->pieces[i].item);
	workq_free(q); /* runs what is queued (or skips it after a failure) */
	if (ret)
		export_fail(x, ret, "%s", strerror(-ret));
	return x->err;
}

/*
 * The file the image is written to: an unnamed one in out's directory (O_TMPFILE), so that a
 * process killed before the end leaves nothing; else (no O_TMPFILE there, or no /proc to link
 * it by) a named one, OUT.tmp.XXXXXX, in tmp. *named says which.
 */
static int export_open(const char *out, char tmp[PATH_MAX], bool *named)
{
	char dir[PATH_MAX];
	int fd;

	if (snprintf(tmp, PATH_MAX, "%s.tmp.XXXXXX", out) >= PATH_MAX)
		return -ENAMETOOLONG;
	fs_dirname(out, dir, sizeof(dir));
	*named = false;
	if (access("/proc/self/fd", X_OK) == 0) {
		fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, FS_DATA_MODE);
		if (fd >= 0)
			return fd;
		if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
			return -errno;
	}
	*named = true;
	return fs_mkstemp(tmp, 0, FS_DATA_MODE);
}

/* Give the unnamed file fd a name, OUT.tmp.PID (in tmp), to rename into place. */
static int export_link(int fd, const char *out, char tmp[PATH_MAX])
{
	char proc[64];

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (snprintf(tmp, PATH_MAX, "%s.tmp.%d", out, (int)getpid()) >= PATH_MAX)
		return -ENAMETOOLONG;
	for (int tries = 0; tries < 2; tries++) {
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			break;
		unlink(tmp); /* left by a dead process of our pid: this pid is ours now */
	}
	return -errno;
}

/* Write the whole image into a temporary file next to out, then rename it into place. */
static int export_to(struct export_ctx *x)
{
	const char *out = x->o->out_path;
	char tmp[PATH_MAX], dir[PATH_MAX];
	bool named;
	int ret;

	x->fd = export_open(out, tmp, &named);
	if (x->fd < 0) {
		export_fail_file(x, x->fd, out);
		return x->err;
	}
	if (ftruncate(x->fd, (off_t)x->d.size) < 0)
		export_fail_file(x, -errno, out);
	else
		export_all(x);
	if (!x->err && fsync(x->fd) < 0)
		export_fail_file(x, -errno, out);
	if (!x->err && !named) {
		ret = export_link(x->fd, out, tmp);
		if (ret)
			export_fail_file(x, ret, out);
		else
			named = true;
	}
	if (close(x->fd) < 0 && !x->err)
		export_fail_file(x, -errno, out);
	if (!x->err) {
		int e = fs_rename_output(tmp, out);

		if (e)
			export_fail_file(x, e, out);
	}
	if (x->err) {
		if (named)
			unlink(tmp);
		return x->err;
	}
	fs_dirname(out, dir, sizeof(dir));
	ret = fs_fsync_dir(dir);
	if (ret)
		export_fail_file(x, ret, dir);
	return ret;
}

/* The image disk opened as an export reads it: read-only, verified, nothing ahead. */
static int export_disk_open(const struct blkd_export_opts *o, struct disk *d, char *why,
			    size_t why_len)
{
	struct disk_spec ds = o->disk;
	int ret;

	ds.read_only = true;
	ds.tiers.no_plain = true;
	ds.readahead = -1;
	ds.check = false;
	ds.prefetch_trace = ds.trace_record = NULL;
	ds.prefetch_all = false;
	if (!ds.mem_cache)
		ds.mem_cache = BLKD_EXPORT_MEM_CACHE_DEFAULT;
	ret = disk_open(&ds, d, why, why_len);
	if (!ret && !disk_layout(d)) {
		disk_close(d);
		return why_set(why, why_len, -EINVAL, "%s: not an image (lazyblk export writes "
			       "an image layout's disk)", ds.raw_path);
	}
	return ret;
}

int blkd_export(const struct blkd_export_opts *o, struct blkd_export_stats *st, char *why,
		size_t why_len)
{
	struct export_ctx x = { .o = o, .fd = -1, .why = why, .why_len = why_len };
	struct disk_image_stats is;
	struct timespec t0;
	int ret;

	memset(st, 0, sizeof(*st));
	if (why_len)
		why[0] = '\0';
	ret = export_disk_open(o, &x.d, why, why_len);
	if (ret)
		return ret;
	pthread_mutex_init(&x.lock, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	x.l = disk_layout(&x.d);
	ret = export_to(&x);
	if (!ret && !disk_image_stats(&x.d, &is)) {
		st->disk_bytes = x.d.size;
		st->mapped_bytes = x.mapped;
		st->written_bytes = x.written;
		st->chunks = x.l->hdr.chunk_count;
		st->chunk_loads = is.chunk_loads;
		st->seconds = clock_ms_since(&t0) / 1e3;
		st->cas = is.cas;
	}
	free(x.pieces);
	disk_close(&x.d);
	pthread_mutex_destroy(&x.lock);
	return ret;
}
