/* SPDX-License-Identifier: MIT */
/* Plain copies of verified chunks (plain.h). */
#include "plain.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/fsutil.h"
#include "../common/uring.h"
#include "chunk.h"

#define PLAIN_MAGIC "LZBKPLN1"
/*
 * The crc32c pass reads this much at a time, into a buffer on the stack: a heap buffer
 * would be kept by each loading thread's malloc arena (half a MiB of anonymous memory per
 * thread, per server, measured), which is what the plain tier is there to avoid.
 */
#define CHECK_BUF ((size_t)32 << 10)

struct plain_trailer {
	char magic[8];
	uint64_t len;
	uint8_t digest[SHA256_LEN];
	uint32_t crc;
	uint8_t zero[12];
};

_Static_assert(sizeof(struct plain_trailer) == PLAIN_TRAILER, "plain trailer");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the trailer is little-endian");

/* Trailer and size of an open plain copy: 0 with *len, or -EBADMSG with why. */
static int trailer_check(int fd, const struct stat *st, const uint8_t d[SHA256_LEN], size_t max,
			 struct plain_trailer *t, size_t *len, char *why, size_t why_len)
{
	static const uint8_t zero[12];
	int ret;

	if (!S_ISREG(st->st_mode) || st->st_size < (off_t)PLAIN_TRAILER)
		return why_set(why, why_len, -EBADMSG, "too short for a plain copy");
	ret = uring_pread_full(fd, t, sizeof(*t), st->st_size - (off_t)PLAIN_TRAILER);
	if (ret)
		return ret == -EIO ? why_set(why, why_len, -EBADMSG, "unreadable") : ret;
	if (memcmp(t->magic, PLAIN_MAGIC, sizeof(t->magic)) || memcmp(t->zero, zero, sizeof(zero)))
		return why_set(why, why_len, -EBADMSG, "no plain-copy trailer");
	if (memcmp(t->digest, d, SHA256_LEN))
		return why_set(why, why_len, -EBADMSG, "trailer names another chunk");
	if (t->len > max || t->len + PLAIN_TRAILER != (uint64_t)st->st_size)
		return why_set(why, why_len, -EBADMSG, "size does not match its trailer");
	*len = (size_t)t->len;
	return 0;
}

/* crc32c of the first len bytes of fd. */
static int crc_file(int fd, size_t len, uint32_t *crc)
{
	uint8_t b[CHECK_BUF];
	uint32_t c = 0;
	int ret = 0;

	for (size_t off = 0; off < len && !ret; off += CHECK_BUF) {
		size_t n = len - off < CHECK_BUF ? len - off : CHECK_BUF;

		ret = uring_pread_full(fd, b, n, (off_t)off);
		if (!ret)
			c = crc32c(c, b, n);
	}
	*crc = c;
	return ret;
}

/*
 * A plain copy opened for reading: its descriptor, or -errno; a FIFO, a device, a directory
 * or a link there (never opened: it would block or be followed) is a bad copy, -EBADMSG.
 */
static int plain_file_open(int dfd, const char *name, struct stat *st, char *why,
			   size_t why_len)
{
	int fd = fs_open_regular(dfd, name, O_NOFOLLOW, st);

	if (fd == -EINVAL || fd == -EISDIR || fd == -ELOOP)
		return why_set(why, why_len, -EBADMSG, "not a regular file");
	return fd;
}

int plain_open(struct store *s, const uint8_t d[SHA256_LEN], size_t max, int *fd, size_t *len,
	       char *why, size_t why_len)
{
	char rel[STORE_REL_LEN];
	struct plain_trailer t;
	struct stat st;
	uint32_t crc;
	int pfd, f, ret;

	pfd = store_plain_dir(s, false);
	if (pfd < 0)
		return pfd;
	store_rel_path(d, rel);
	f = plain_file_open(pfd, rel, &st, why, why_len);
	if (f < 0)
		return f;
	ret = trailer_check(f, &st, d, max, &t, len, why, why_len);
	if (ret)
		goto fail;
	ret = crc_file(f, *len, &crc);
	if (ret == -EIO)
		ret = why_set(why, why_len, -EBADMSG, "unreadable");
	if (ret)
		goto fail;
	if (crc != t.crc) {
		ret = why_set(why, why_len, -EBADMSG, "crc32c of its bytes does not match its trailer");
		goto fail;
	}
	*fd = f;
	return 0;
fail:
	close(f);
	return ret;
}

int plain_put(struct store *s, const uint8_t d[SHA256_LEN], const void *data, size_t len,
	      int *fd, uint64_t *file_bytes)
{
	struct plain_trailer t = { .len = len };
	char name[SHA256_HEX_LEN + 48], rel[STORE_REL_LEN];
	int pfd, tmpfd, f, ret;

	if (fd)
		*fd = -1;
	pfd = store_plain_dir(s, true);
	if (pfd < 0)
		return pfd;
	store_rel_path(d, rel);
	if (faccessat(pfd, rel, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
		return 0;
	tmpfd = store_tmp_dir(s);
	if (tmpfd < 0)
		return tmpfd;
	memcpy(t.magic, PLAIN_MAGIC, sizeof(t.magic));
	memcpy(t.digest, d, SHA256_LEN);
	t.crc = crc32c(0, data, len);
	store_tmp_name(s, d, name, sizeof(name));
	f = openat(tmpfd, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (f < 0)
		return -errno;
	ret = uring_pwrite_full(f, data, len, 0);
	if (!ret)
		ret = uring_pwrite_full(f, &t, sizeof(t), (off_t)len);
	if (ret)
		goto fail;
	ret = store_commit_tmp(tmpfd, name, pfd, rel);
	if (ret < 0)
		goto fail;
	if (!ret) {
		close(f);
		return 0; /* another thread or process added it first */
	}
	*file_bytes = len + PLAIN_TRAILER;
	if (fd)
		*fd = f;
	else
		close(f);
	return 1;
fail:
	unlinkat(tmpfd, name, 0);
	close(f);
	return ret;
}

int plain_remove(struct store *s, const uint8_t d[SHA256_LEN], uint64_t *bytes)
{
	char rel[STORE_REL_LEN];
	struct stat st;
	int pfd = store_plain_dir(s, false);

	*bytes = 0;
	if (pfd < 0)
		return pfd;
	store_rel_path(d, rel);
	if (fstatat(pfd, rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (unlinkat(pfd, rel, 0) < 0)
		return -errno;
	*bytes = (uint64_t)st.st_size;
	return 0;
}

int plain_verify_file(const char *path, const uint8_t d[SHA256_LEN], char *why,
		      size_t why_len)
{
	struct plain_trailer t;
	uint8_t sum[SHA256_LEN];
	struct stat st;
	uint8_t *data = NULL;
	size_t len, n;
	int fd, ret;

	fd = plain_file_open(AT_FDCWD, path, &st, why, why_len);
	if (fd < 0)
		return fd;
	ret = trailer_check(fd, &st, d, CHUNK_SIZE_MAX, &t, &len, why, why_len);
	/* read, not mapped: a file truncated meanwhile must not raise SIGBUS */
	if (!ret)
		ret = fs_read_fd(fd, &data, &n);
	close(fd);
	if (!ret && n < len)
		ret = why_set(why, why_len, -EBADMSG, "truncated while read");
	if (!ret)
		ret = sha256_buf(data, len, sum);
	if (!ret && memcmp(sum, d, SHA256_LEN))
		ret = why_set(why, why_len, -EBADMSG, "content does not match its sha256 name");
	free(data);
	return ret;
}
