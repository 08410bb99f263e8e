// SPDX-License-Identifier: MIT
/* File digests remembered by file identity (see digest_memo.h). */
#include "digest_memo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


#define MEMO_MAGIC "lazyblk-digest-memo-1\n"

/* What a memo file holds: the magic, the identity again (names can collide only by bug),
 * and the digest. */
struct memo {
	char magic[sizeof(MEMO_MAGIC) - 1];
	uint64_t dev, ino, size;
	int64_t mtime_s, mtime_ns, ctime_s, ctime_ns;
	uint8_t digest[SHA256_LEN];
};

static void memo_fill(struct memo *m, const struct stat *st)
{
	memset(m, 0, sizeof(*m));
	memcpy(m->magic, MEMO_MAGIC, sizeof(m->magic));
	m->dev = (uint64_t)st->st_dev;
	m->ino = (uint64_t)st->st_ino;
	m->size = (uint64_t)st->st_size;
	m->mtime_s = (int64_t)st->st_mtim.tv_sec;
	m->mtime_ns = (int64_t)st->st_mtim.tv_nsec;
	m->ctime_s = (int64_t)st->st_ctim.tv_sec;
	m->ctime_ns = (int64_t)st->st_ctim.tv_nsec;
}

int digest_memo_dir(const char *cache_dir, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/digests", cache_dir);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int digest_memo_identity(const struct stat *st, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%llx-%llx-%llx-%llx.%llx-%llx.%llx",
			 (unsigned long long)st->st_dev, (unsigned long long)st->st_ino,
			 (unsigned long long)st->st_size, (unsigned long long)st->st_mtim.tv_sec,
			 (unsigned long long)st->st_mtim.tv_nsec,
			 (unsigned long long)st->st_ctim.tv_sec,
			 (unsigned long long)st->st_ctim.tv_nsec);

	return n > 0 && (size_t)n < len ? 0 : -1;
}

static int memo_path(const char *dir, const struct stat *st, char *buf, size_t len)
{
	char id[128];
	int n;

	if (digest_memo_identity(st, id, sizeof(id)))
		return -1;
	n = snprintf(buf, len, "%s/%s", dir, id);
	return n > 0 && (size_t)n < len ? 0 : -1;
}

bool digest_memo_get(const char *dir, const struct stat *st, uint8_t d[SHA256_LEN])
{
	struct memo want, got;
	char path[PATH_MAX];
	int fd;
	bool hit;

	memo_fill(&want, st);
	if (!dir || !*dir || memo_path(dir, st, path, sizeof(path)))
		return false;
	fd = fs_open_regular(AT_FDCWD, path, O_NOFOLLOW, NULL);
	if (fd < 0)
		return false;
	hit = read(fd, &got, sizeof(got)) == (ssize_t)sizeof(got) &&
	      !memcmp(&got, &want, offsetof(struct memo, digest));
	close(fd);
	if (hit)
		memcpy(d, got.digest, SHA256_LEN);
	return hit;
}

int digest_memo_sha256(const char *dir, const struct fs_map *m, uint8_t d[SHA256_LEN])
{
	int ret;

	if (digest_memo_get(dir, &m->st, d))
		return 0;
	ret = sha256_buf(m->data ? m->data : (const uint8_t *)"", m->len, d);
	if (!ret)
		digest_memo_put(dir, &m->st, d);
	return ret;
}

void digest_memo_put(const char *dir, const struct stat *st, const uint8_t d[SHA256_LEN])
{
	char path[PATH_MAX];
	struct memo m;

	memo_fill(&m, st);
	memcpy(m.digest, d, SHA256_LEN);
	if (!dir || !*dir || memo_path(dir, st, path, sizeof(path)) || fs_mkdir_p(dir, 0700))
		return;
	(void)fs_write_file_atomic(path, &m, sizeof(m), 0600);
}
