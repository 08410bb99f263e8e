/* SPDX-License-Identifier: MIT */
#include "store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/grow.h"
#include "chunk.h"

#define STAGE_MAX_CHUNKS 4096
#define STAGE_MAX_BYTES (256ull << 20)

struct staged {
	uint8_t digest[SHA256_LEN];
	uint64_t seq;
};

struct store {
	char *dir;
	int dirfd;
	int chunksfd;
	int tmpfd;                   /* -1 unless opened with create (then store_put works) */
	int cached_tmpfd;            /* tmp/ for store_put_cached, opened on first use */
	int plainfd;                 /* plain/, opened on first use */
	pthread_mutex_t lock;        /* staging list */
	pthread_mutex_t commit_lock; /* one commit at a time */
	struct staged *stage;
	size_t n_stage, cap_stage;
	uint64_t stage_bytes;
	uint64_t seq;
	pid_t pid;                   /* in staged names, so writers never collide */
	uid_t uid;                   /* the store directory's owner and group */
	gid_t gid;
};

const char *store_dir(const struct store *s) { return s->dir; }

/*
 * mkdirat(dfd, name, 0755), EEXIST being fine: 0 or -errno. A directory root makes in a store
 * another user owns is given to that user, whose store it is: serve --user USER, started as
 * root, opens a cache USER owns and then writes it as USER (docs/security.md).
 */
static int store_mkdirat(const struct store *s, int dfd, const char *name)
{
	if (mkdirat(dfd, name, 0755) < 0)
		return errno == EEXIST ? 0 : -errno;
	if (geteuid() == 0 && s->uid != 0)
		(void)!fchownat(dfd, name, s->uid, s->gid, AT_SYMLINK_NOFOLLOW);
	return 0;
}

static int store_open_as(const char *dir, bool create, bool fanout, struct store **out)
{
	struct store *s;
	struct stat st;
	int ret;

	if (create) {
		ret = fs_mkdir_p(dir, 0755);
		if (ret)
			return ret;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->dirfd = s->chunksfd = s->tmpfd = s->cached_tmpfd = s->plainfd = -1;
	s->pid = getpid();
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->commit_lock, NULL);
	s->dir = strdup(dir);
	if (!s->dir) {
		ret = -ENOMEM;
		goto fail;
	}
	s->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->dirfd < 0 || fstat(s->dirfd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	s->uid = st.st_uid;
	s->gid = st.st_gid;
	ret = store_marker_check(dir, s->dirfd, create, false);
	if (ret)
		goto fail;
	if (create) {
		ret = store_mkdirat(s, s->dirfd, "chunks");
		if (!ret)
			ret = store_mkdirat(s, s->dirfd, "tmp");
		if (ret)
			goto fail;
	}
	s->chunksfd = openat(s->dirfd, "chunks", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s->chunksfd < 0) {
		ret = errno == ENOENT ? -ENOENT : -errno;
		goto fail;
	}
	if (create && fanout) {
		for (int i = 0; i < 256; i++) {
			char sub[3];

			snprintf(sub, sizeof(sub), "%02x", i);
			ret = store_mkdirat(s, s->chunksfd, sub);
			if (ret)
				goto fail;
		}
	}
	if (create) {
		struct store_tmp_count swept;

		s->tmpfd = openat(s->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (s->tmpfd < 0) {
			ret = -errno;
			goto fail;
		}
		/* what dead writers left (a failure to sweep is no reason not to write) */
		store_tmp_sweep(s, STORE_TMP_GRACE_SECS, STORE_SWEEP_SKIP_LIVE, &swept);
	}
	*out = s;
	return 0;
fail:
	store_close(s);
	return ret;
}

int store_open(const char *dir, bool create, struct store **out)
{
	return store_open_as(dir, create, true, out);
}

int store_create_cache(const char *dir, struct store **out)
{
	return store_open_as(dir, true, false, out);
}

void store_close(struct store *s)
{
	if (!s)
		return;
	if (s->n_stage)
		store_commit(s);
	if (s->dirfd >= 0)
		close(s->dirfd);
	if (s->chunksfd >= 0)
		close(s->chunksfd);
	if (s->tmpfd >= 0)
		close(s->tmpfd);
	if (s->cached_tmpfd >= 0)
		close(s->cached_tmpfd);
	if (s->plainfd >= 0)
		close(s->plainfd);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->commit_lock);
	free(s->stage);
	free(s->dir);
	free(s);
}

static void rel_path(const uint8_t d[SHA256_LEN], char rel[3 + SHA256_HEX_LEN + 1])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	snprintf(rel, 3 + SHA256_HEX_LEN + 1, "%.2s/%s", hex, hex);
}

static void tmp_name_pid(pid_t pid, const uint8_t d[SHA256_LEN], uint64_t seq, char *buf,
			 size_t len)
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	snprintf(buf, len, "%s.%d.%llu", hex, (int)pid, (unsigned long long)seq);
}

static void tmp_name(const struct store *s, const uint8_t d[SHA256_LEN], uint64_t seq, char *buf,
		     size_t len)
{
	tmp_name_pid(s->pid, d, seq, buf, len);
}

void store_chunk_path(const struct store *s, const uint8_t d[SHA256_LEN], char *buf, size_t len)
{
	char rel[STORE_REL_LEN];

	rel_path(d, rel);
	snprintf(buf, len, "%s/chunks/%s", s->dir, rel);
}

int store_has(struct store *s, const uint8_t d[SHA256_LEN])
{
	char rel[STORE_REL_LEN];
	struct stat st;

	rel_path(d, rel);
	if (fstatat(s->chunksfd, rel, &st, 0) == 0)
		return S_ISREG(st.st_mode) ? 1 : 0;
	return errno == ENOENT ? 0 : -errno;
}

int store_put(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len)
{
	char name[SHA256_HEX_LEN + 48];
	bool commit;
	uint64_t seq;
	int fd, ret;

	if (s->tmpfd < 0)
		return -EROFS;
	pthread_mutex_lock(&s->lock);
	seq = s->seq++;
	pthread_mutex_unlock(&s->lock);
	tmp_name(s, d, seq, name, sizeof(name));
	fd = openat(s->tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ret = fs_write_full(fd, frame, len);
	/* start writeback now, so the batch's syncfs finds little left to write */
	if (!ret)
		sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE);
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret) {
		unlinkat(s->tmpfd, name, 0);
		return ret;
	}
	pthread_mutex_lock(&s->lock);
	if (!grow_from((void **)&s->stage, &s->cap_stage, s->n_stage + 1, sizeof(*s->stage), 256)) {
		pthread_mutex_unlock(&s->lock);
		unlinkat(s->tmpfd, name, 0);
		return -ENOMEM;
	}
	memcpy(s->stage[s->n_stage].digest, d, SHA256_LEN);
	s->stage[s->n_stage].seq = seq;
	s->n_stage++;
	s->stage_bytes += len;
	commit = s->n_stage >= STAGE_MAX_CHUNKS || s->stage_bytes >= STAGE_MAX_BYTES;
	pthread_mutex_unlock(&s->lock);
	return commit ? store_commit(s) : 0;
}

/* fsync chunks/XX (XX: hex of first): a rename into it is durable. 0 or -errno. */
static int fsync_fanout(struct store *s, unsigned first)
{
	char sub[3];
	int fd, ret = 0;

	snprintf(sub, sizeof(sub), "%02x", first & 0xff);
	fd = openat(s->chunksfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	return ret;
}

int store_commit(struct store *s)
{
	struct staged *batch;
	uint8_t touched[256] = { 0 };
	size_t n;
	int ret = 0;

	pthread_mutex_lock(&s->commit_lock);
	pthread_mutex_lock(&s->lock);
	batch = s->stage;
	n = s->n_stage;
	s->stage = NULL;
	s->n_stage = s->cap_stage = 0;
	s->stage_bytes = 0;
	pthread_mutex_unlock(&s->lock);

	if (n == 0)
		goto out;
	/* 1. the staged files' data reaches the disk */
	if (syncfs(s->tmpfd) < 0)
		ret = -errno;
	/* 2. each becomes visible under its name, complete */
	for (size_t i = 0; i < n; i++) {
		char name[SHA256_HEX_LEN + 48], rel[STORE_REL_LEN];

		tmp_name(s, batch[i].digest, batch[i].seq, name, sizeof(name));
		if (ret) {
			unlinkat(s->tmpfd, name, 0);
			continue;
		}
		rel_path(batch[i].digest, rel);
		if (renameat(s->tmpfd, name, s->chunksfd, rel) < 0) {
			ret = -errno;
			unlinkat(s->tmpfd, name, 0);
			continue;
		}
		touched[batch[i].digest[0]] = 1;
	}
	/* 3. the renames are durable */
	for (int i = 0; i < 256 && !ret; i++)
		if (touched[i])
			ret = fsync_fanout(s, i);
out:
	pthread_mutex_unlock(&s->commit_lock);
	free(batch);
	return ret;
}

int store_read(struct store *s, const uint8_t d[SHA256_LEN], uint8_t **frame, size_t *len)
{
	char rel[STORE_REL_LEN];
	int fd, ret;

	rel_path(d, rel);
	/* a FIFO, a device, a directory or a link there is a corrupt chunk, never opened */
	fd = fs_open_regular(s->chunksfd, rel, O_NOFOLLOW, NULL);
	if (fd == -EINVAL || fd == -EISDIR || fd == -ELOOP)
		return -EBADMSG;
	if (fd < 0)
		return fd;
	ret = fs_read_fd(fd, frame, len);
	close(fd);
	return ret;
}

/*
 * tmp/ for store_put_cached. A store opened without create has no tmpfd (store_put refuses
 * to stage there), so cached puts use a descriptor of their own, made on first use.
 */
/*
 * The descriptor of subdirectory name of the store, opened on first use and kept in *slot
 * (made first if create): the descriptor, or -errno (then tried again on the next call).
 */
static int subdir_fd(struct store *s, int *slot, const char *name, bool create)
{
	int fd = __atomic_load_n(slot, __ATOMIC_ACQUIRE);

	if (fd >= 0)
		return fd;
	pthread_mutex_lock(&s->lock);
	fd = *slot;
	if (fd < 0) {
		fd = create ? store_mkdirat(s, s->dirfd, name) : 0;
		if (fd < 0)
			goto out;
		fd = openat(s->dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			fd = -errno;
			goto out;
		}
		__atomic_store_n(slot, fd, __ATOMIC_RELEASE);
	}
out:
	pthread_mutex_unlock(&s->lock);
	return fd;
}

static int cached_tmp_dir(struct store *s)
{
	if (s->tmpfd >= 0)
		return s->tmpfd; /* set once by store_open, never changed */
	return subdir_fd(s, &s->cached_tmpfd, "tmp", true);
}

/*
 * Move tmp/name to dirfd/rel unless rel exists: 0 moved, -EEXIST, -errno. Filesystems
 * without RENAME_NOREPLACE get link(2), which fails the same way on an existing name.
 */
static int rename_noreplace(int tmpfd, const char *name, int dirfd, const char *rel)
{
	if (renameat2(tmpfd, name, dirfd, rel, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -errno;
	if (linkat(tmpfd, name, dirfd, rel, 0) < 0)
		return -errno;
	unlinkat(tmpfd, name, 0);
	return 0;
}

int store_commit_tmp(int tmpfd, const char *name, int topfd, const char *rel)
{
	int ret = rename_noreplace(tmpfd, name, topfd, rel);

	if (ret == -ENOENT) {
		/* the fan-out directory is missing (a cache made without them, a partial copy) */
		char sub[3] = { rel[0], rel[1], '\0' };

		if (mkdirat(topfd, sub, 0755) < 0 && errno != EEXIST)
			return -errno;
		ret = rename_noreplace(tmpfd, name, topfd, rel);
	}
	if (ret == -EEXIST) {
		unlinkat(tmpfd, name, 0);
		return 0; /* another thread or process added it first */
	}
	return ret ? ret : 1;
}

int store_put_cached(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len)
{
	char name[SHA256_HEX_LEN + 48], rel[STORE_REL_LEN];
	int tmpfd, fd = -1, ret;

	ret = store_has(s, d);
	if (ret)
		return ret < 0 ? ret : 0;
	tmpfd = cached_tmp_dir(s);
	if (tmpfd < 0)
		return tmpfd;
	/*
	 * A unique staging name: getpid() at the call (a forked child shares s and s->seq with
	 * its parent, not its pid), s->seq for the threads of one process. O_EXCL and a few
	 * retries cover a file left by a dead process of the same pid (or one in another pid
	 * namespace sharing the store).
	 */
	for (int tries = 0; fd < 0 && tries < 16; tries++) {
		store_tmp_name(s, d, name, sizeof(name));
		fd = openat(tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (fd < 0 && errno != EEXIST)
			return -errno;
	}
	if (fd < 0)
		return -EEXIST;
	ret = fs_write_full(fd, frame, len);
	if (close(fd) < 0 && !ret)
		ret = -errno;
	if (ret)
		goto fail;
	rel_path(d, rel);
	ret = store_commit_tmp(tmpfd, name, s->chunksfd, rel);
	if (ret >= 0)
		return ret;
fail:
	unlinkat(tmpfd, name, 0);
	return ret;
}

int store_remove_sized(struct store *s, const uint8_t d[SHA256_LEN], uint64_t *plain_bytes)
{
	char rel[STORE_REL_LEN];
	int pfd, ret = 0;

	rel_path(d, rel);
	if (unlinkat(s->chunksfd, rel, 0) < 0)
		ret = -errno;
	*plain_bytes = 0;
	pfd = store_plain_dir(s, false);
	if (pfd >= 0) {
		struct stat st;

		if (fstatat(pfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 && unlinkat(pfd, rel, 0) == 0)
			*plain_bytes = (uint64_t)st.st_size;
	}
	return ret;
}

int store_remove(struct store *s, const uint8_t d[SHA256_LEN])
{
	uint64_t plain;

	return store_remove_sized(s, d, &plain);
}

void store_rel_path(const uint8_t d[SHA256_LEN], char rel[STORE_REL_LEN])
{
	rel_path(d, rel);
}

int store_tmp_dir(struct store *s)
{
	return cached_tmp_dir(s);
}

void store_tmp_name(struct store *s, const uint8_t d[SHA256_LEN], char *buf, size_t len)
{
	uint64_t seq;

	pthread_mutex_lock(&s->lock);
	seq = s->seq++;
	pthread_mutex_unlock(&s->lock);
	tmp_name_pid(getpid(), d, seq, buf, len);
}

/* A staging name: 64 hex digits, '.', the writer's pid, '.', a sequence number. */
static bool staging_name(const char *name, pid_t *pid)
{
	char *end;
	long v;

	for (int i = 0; i < SHA256_HEX_LEN; i++)
		if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
			return false;
	if (name[SHA256_HEX_LEN] != '.')
		return false;
	errno = 0;
	v = strtol(name + SHA256_HEX_LEN + 1, &end, 10);
	*pid = !errno && *end == '.' && v > 0 && v <= INT_MAX ? (pid_t)v : 0;
	return true;
}

/* The writer may be at work: its pid is ours or a live process's (pid reuse errs on keeping). */
static bool writer_alive(pid_t pid)
{
	return pid > 0 && (pid == getpid() || kill(pid, 0) == 0 || errno == EPERM);
}

int store_tmp_sweep(struct store *s, uint64_t grace_secs, unsigned flags,
		    struct store_tmp_count *c)
{
	struct timespec now;
	struct dirent *de;
	int64_t cutoff;
	int fd, ret = 0;
	DIR *dir;

	memset(c, 0, sizeof(*c));
	clock_gettime(CLOCK_REALTIME, &now);
	cutoff = grace_secs > (uint64_t)now.tv_sec ? INT64_MIN
						   : (int64_t)now.tv_sec - (int64_t)grace_secs;
	fd = openat(s->dirfd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	dir = fdopendir(fd);
	if (!dir) {
		ret = -errno;
		close(fd);
		return ret;
	}
	while ((de = readdir(dir)) != NULL) {
		struct stat st;
		pid_t pid;

		if (!staging_name(de->d_name, &pid))
			continue;
		if (fstatat(fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		if ((int64_t)st.st_mtim.tv_sec > cutoff ||
		    ((flags & STORE_SWEEP_SKIP_LIVE) && writer_alive(pid))) {
			c->young++;
			c->young_bytes += (uint64_t)st.st_size;
			continue;
		}
		if (!(flags & STORE_SWEEP_DRY_RUN) && unlinkat(fd, de->d_name, 0) < 0) {
			if (errno == ENOENT)
				continue;
			ret = -errno;
			break;
		}
		c->stale++;
		c->stale_bytes += (uint64_t)st.st_size;
	}
	closedir(dir);
	return ret;
}

int store_plain_dir(struct store *s, bool create)
{
	return subdir_fd(s, &s->plainfd, "plain", create);
}

uint64_t store_plain_size(struct store *s, const uint8_t d[SHA256_LEN])
{
	char rel[STORE_REL_LEN];
	int pfd = store_plain_dir(s, false);
	struct stat st;

	if (pfd < 0)
		return 0;
	rel_path(d, rel);
	if (fstatat(pfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return 0;
	return (uint64_t)st.st_size;
}

void store_touch(struct store *s, const uint8_t d[SHA256_LEN])
{
	/* mtime only: atime stays what the file system makes of it */
	const struct timespec times[2] = { { .tv_nsec = UTIME_OMIT }, { .tv_nsec = UTIME_NOW } };
	char rel[STORE_REL_LEN];
	struct timespec now;
	struct stat st;

	rel_path(d, rel);
	if (fstatat(s->chunksfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	if (now.tv_sec - st.st_mtim.tv_sec <= STORE_TOUCH_SECS)
		return;
	utimensat(s->chunksfd, rel, times, AT_SYMLINK_NOFOLLOW);
}

static int foreach_in(struct store *s, int topfd, const char *top, store_iter_fn cb, void *arg)
{
	for (int i = 0; i < 256; i++) {
		char sub[3];
		DIR *dir;
		struct dirent *de;
		int fd, ret = 0;

		snprintf(sub, sizeof(sub), "%02x", i);
		fd = openat(topfd, sub, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		dir = fdopendir(fd);
		if (!dir) {
			close(fd);
			return -errno;
		}
		while ((de = readdir(dir)) != NULL) {
			uint8_t d[SHA256_LEN];
			char path[PATH_MAX];

			if (de->d_name[0] == '.')
				continue;
			char canon[SHA256_HEX_LEN + 1];

			if (sha256_from_hex(de->d_name, d) || d[0] != i)
				continue; /* not a chunk name: ignored */
			sha256_to_hex(d, canon);
			if (strcmp(canon, de->d_name))
				continue; /* names are lowercase: anything else is not ours */
			snprintf(path, sizeof(path), "%s/%s/%s/%s", s->dir, top, sub, de->d_name);
			ret = cb(arg, d, path);
			if (ret)
				break;
		}
		closedir(dir);
		if (ret)
			return ret;
	}
	return 0;
}

int store_foreach(struct store *s, store_iter_fn cb, void *arg)
{
	return foreach_in(s, s->chunksfd, "chunks", cb, arg);
}

int store_foreach_plain(struct store *s, store_iter_fn cb, void *arg)
{
	int fd = store_plain_dir(s, false);

	if (fd == -ENOENT)
		return 0;
	return fd < 0 ? fd : foreach_in(s, fd, "plain", cb, arg);
}

static int stats_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct store_stats *st = arg;
	uint8_t hdr[32];
	struct stat sb;
	uint64_t raw;
	ssize_t n;
	int fd;

	(void)d;
	fd = fs_open_regular(AT_FDCWD, path, O_NOFOLLOW, &sb);
	if (fd == -ENOENT)
		return 0; /* vanished: another process evicted it */
	st->chunks++;
	if (fd < 0) {
		st->bad_headers++; /* not a regular file (never opened), or unreadable */
		return 0;
	}
	st->stored_bytes += (uint64_t)sb.st_size;
	n = pread(fd, hdr, sizeof(hdr), 0);
	if (n > 0 && chunk_content_size(hdr, (size_t)n, &raw) == 0)
		st->raw_bytes += raw;
	else
		st->bad_headers++;
	close(fd);
	return 0;
}

static int plain_stats_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct store_stats *st = arg;
	struct stat sb;

	(void)d;
	if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode)) {
		st->plain_files++;
		st->plain_bytes += (uint64_t)sb.st_size;
	}
	return 0;
}

int store_stats(struct store *s, struct store_stats *st)
{
	int ret;

	memset(st, 0, sizeof(*st));
	ret = store_foreach(s, stats_one, st);
	return ret ? ret : store_foreach_plain(s, plain_stats_one, st);
}

int store_replace_chunk(struct store *s, const uint8_t d[SHA256_LEN], const void *frame,
			size_t len)
{
	char rel[STORE_REL_LEN], name[NAME_MAX + 1];
	int tmpfd = store_tmp_dir(s), fd, ret;

	if (tmpfd < 0)
		return tmpfd;
	rel_path(d, rel);
	store_tmp_name(s, d, name, sizeof(name));
	fd = openat(tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	ret = fs_write_full(fd, frame, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (!ret && renameat(tmpfd, name, s->chunksfd, rel) < 0)
		ret = -errno;
	if (ret) {
		unlinkat(tmpfd, name, 0);
		return ret;
	}
	return fsync_fanout(s, d[0]);
}
