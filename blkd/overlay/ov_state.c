/* SPDX-License-Identifier: MIT */
/*
 * The overlay's state, as bits and as files (format in overlay_int.h): the 2-bit block
 * states of a bitmap, the state file's header and its check, loading it, making a new one
 * or a version 1 one version 2, the names and the opening of the overlay's files, their
 * syncs, and a bitmap's words written in place. What overlay.c, ov_live.c, ov_flush.c,
 * ov_snapshot.c and delta.c share; it calls none of them.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/crc32c.h"
#include "../../common/fsutil.h"
#include "../../common/uring.h"
#include "overlay_int.h"

/* ------------------------------------------------------------------ bitmaps */

/* The mask of the 2-bit states [first, last) of a word (0 <= first < last <= 32). */
static uint64_t state_mask(unsigned int first, unsigned int last)
{
	uint64_t m = last - first == 32 ? ~0ULL : (1ULL << (2 * (last - first))) - 1;

	return m << (2 * first);
}

uint64_t ov_bits_run(const uint64_t *words, uint64_t blocks, uint64_t b, enum ov_state *st)
{
	size_t nw = ov_words(blocks), w = (size_t)(b / 32);
	enum ov_state s = ov_get(words, b);
	uint64_t pat = (uint64_t)s * OV_LO, diff, end;

	diff = (words[w] ^ pat) >> (2 * (b % 32));
	if (diff) {
		end = b + (uint64_t)__builtin_ctzll(diff) / 2;
	} else {
		for (w++; w < nw && words[w] == pat; w++)
			;
		end = w < nw ? (uint64_t)w * 32 + (uint64_t)__builtin_ctzll(words[w] ^ pat) / 2
			     : (uint64_t)nw * 32;
	}
	if (st)
		*st = s;
	return (end < blocks ? end : blocks) - b;
}

bool ov_bits_set(uint64_t *words, uint64_t b, uint64_t n, enum ov_state st, uint64_t *dirty,
		 uint64_t *zero)
{
	uint64_t pat = (uint64_t)st * OV_LO, end = b + n;
	bool changed = false;

	while (b < end) {
		size_t w = (size_t)(b / 32);
		uint64_t base = (uint64_t)w * 32;
		unsigned int first = (unsigned int)(b - base);
		unsigned int last = end - base < 32 ? (unsigned int)(end - base) : 32;
		uint64_t m = state_mask(first, last), old = words[w];
		uint64_t new = (old & ~m) | (pat & m);

		if (old != new) {
			*dirty += ov_count_dirty(new & m) - ov_count_dirty(old & m);
			*zero += ov_count_zero(new & m) - ov_count_zero(old & m);
			words[w] = new;
			changed = true;
		}
		b = base + last;
	}
	return changed;
}

/* ------------------------------------------------------------------ state file */

static uint32_t state_crc(const struct ov_state_header *hdr)
{
	struct ov_state_header h = *hdr;

	h.header_crc = 0;
	return crc32c(~0u, &h, sizeof(h));
}

int ov_instance_new(uint64_t *out)
{
	uint64_t v = 0;

	while (!v)
		if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v) && errno != EINTR)
			return -errno;
	*out = v;
	return 0;
}

/* The header of a state file for a disk; fills in the checksum. */
static int ov_state_header_init(struct ov_state_header *h, uint64_t disk_bytes,
				const uint8_t digest[SHA256_LEN])
{
	int ret;

	memset(h, 0, sizeof(*h));
	memcpy(h->magic, OV_STATE_MAGIC, sizeof(h->magic));
	h->version = OV_STATE_VERSION;
	h->block_size = DISK_BLOCK;
	h->disk_bytes = disk_bytes;
	h->block_count = disk_bytes / DISK_BLOCK;
	memcpy(h->layout_digest, digest, SHA256_LEN);
	ret = ov_instance_new(&h->instance);
	if (!ret)
		h->header_crc = state_crc(h);
	return ret;
}

int ov_state_fill(int fd, uint64_t disk_bytes, const uint8_t digest[SHA256_LEN],
		  const uint64_t *words)
{
	size_t bytes = ov_words(disk_bytes / DISK_BLOCK) * sizeof(uint64_t);
	uint8_t block[OV_STATE_HDR] = { 0 };
	int ret;

	ret = ov_state_header_init((struct ov_state_header *)block, disk_bytes, digest);
	if (!ret)
		ret = fs_pwrite_full(fd, block, sizeof(block), 0);
	if (!ret && words)
		ret = fs_pwrite_full(fd, words, bytes, OV_STATE_HDR);
	if (!ret && ftruncate(fd, (off_t)(OV_STATE_HDR + bytes)) < 0)
		ret = -errno;
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	return ret;
}

static int (*sync_hook)(struct overlay *ov, enum ov_file which, int ret);

void ov_set_sync_hook(int (*hook)(struct overlay *ov, enum ov_file which, int ret))
{
	sync_hook = hook;
}

int ov_sync(struct overlay *ov, enum ov_file which)
{
	int ret = uring_fdatasync(which == OV_DATA ? ov->fd : ov->state_fd);

	return sync_hook ? sync_hook(ov, which, ret) : ret;
}

int ov_state_path(const char *path, char *buf, size_t len)
{
	return snprintf(buf, len, "%s.state", path) >= (int)len ? -ENAMETOOLONG : 0;
}

int ov_state_upgrade(struct overlay *ov, uint64_t instance)
{
	struct ov_state_header h;
	int ret;

	/*
	 * The words of a version 1 file were written at once, before their data was synced:
	 * those a server killed in this boot left may be in the page cache only, data and
	 * states. The data first, so that the header's sync cannot make a state durable
	 * without it.
	 */
	ret = ov_sync(ov, OV_DATA);
	if (!ret)
		ret = fs_pread_full(ov->state_fd, &h, sizeof(h), 0);
	if (ret)
		return ret;
	h.version = OV_STATE_VERSION;
	h.instance = instance;
	h.header_crc = state_crc(&h);
	ret = fs_pwrite_full(ov->state_fd, &h, sizeof(h), 0);
	if (!ret)
		ret = ov_sync(ov, OV_STATE);
	if (!ret)
		ov->instance = h.instance;
	return ret;
}

/* The header against what the caller expects (want_* may be NULL / 0: anything). */
static int state_check_header(const struct ov_state_header *h, uint64_t size,
			      uint64_t want_bytes, const uint8_t *want_digest, char *why, size_t why_len)
{
	uint64_t need;

	if (h->version != OV_STATE_VERSION && h->version != 1)
		return why_set(why, why_len, -EBADMSG, "unsupported overlay state version");
	if (h->header_crc != state_crc(h))
		return why_set(why, why_len, -EBADMSG, "state header checksum mismatch (file corrupt)");
	if (h->block_size != DISK_BLOCK || h->flags)
		return why_set(why, why_len, -EBADMSG, "unsupported block size or flags in the state file");
	if (!h->block_count || h->block_count > OV_MAX_BLOCKS ||
	    h->disk_bytes != h->block_count * DISK_BLOCK)
		return why_set(why, why_len, -EBADMSG, "bad disk size in the state file (file corrupt)");
	for (size_t i = 0; i < sizeof(h->reserved); i++)
		if (h->reserved[i])
			return why_set(why, why_len, -EBADMSG, "state header reserved bytes not zero (file corrupt)");
	if ((h->version == 1) != !h->instance)
		return why_set(why, why_len, -EBADMSG, "bad instance in the state file (file corrupt)");
	if (want_digest && memcmp(h->layout_digest, want_digest, SHA256_LEN))
		return why_set(why, why_len, -EBADMSG, "overlay belongs to another layout");
	if (want_bytes && h->disk_bytes != want_bytes)
		return why_set(why, why_len, -EBADMSG, "overlay is for a disk of another size");
	need = OV_STATE_HDR + ov_words(h->block_count) * sizeof(uint64_t);
	if (size != need)
		return why_set(why, why_len, -EBADMSG, "%s",
			       size < need ? "truncated state file"
					   : "trailing garbage after the state bitmap");
	return 0;
}

bool ov_bits_valid(const uint64_t *words, uint64_t blocks, uint64_t *dirty, uint64_t *zero)
{
	size_t nw = ov_words(blocks);
	unsigned int tail = (unsigned int)(blocks % 32);

	*dirty = *zero = 0;
	for (size_t w = 0; w < nw; w++) {
		uint64_t x = words[w];

		if (x & (x >> 1) & OV_LO)
			return false;
		*dirty += ov_count_dirty(x);
		*zero += ov_count_zero(x);
	}
	return !tail || !(words[nw - 1] & ~state_mask(0, tail));
}

int ov_state_load(struct overlay *ov, uint64_t want_bytes, const uint8_t *want_digest,
		  char *why, size_t why_len)
{
	struct ov_state_header h;
	struct stat st;
	size_t bytes;
	int ret;

	if (fstat(ov->state_fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return why_set(why, why_len, -EBADMSG, "state file is not a regular file");
	if ((uint64_t)st.st_size < sizeof(h.magic))
		return why_set(why, why_len, -EBADMSG, "truncated state file");
	ret = fs_pread_full(ov->state_fd, &h,
			    (uint64_t)st.st_size < sizeof(h) ? sizeof(h.magic) : sizeof(h), 0);
	if (ret)
		return ret;
	if (memcmp(h.magic, OV_STATE_MAGIC, sizeof(h.magic)))
		return why_set(why, why_len, -EBADMSG, "bad magic (not a lazyblk overlay state file)");
	if ((uint64_t)st.st_size < OV_STATE_HDR)
		return why_set(why, why_len, -EBADMSG, "truncated state file");
	ret = state_check_header(&h, (uint64_t)st.st_size, want_bytes, want_digest, why, why_len);
	if (ret)
		return ret;
	ov->blocks = h.block_count;
	ov->disk_bytes = h.disk_bytes;
	ov->instance = h.instance;
	memcpy(ov->digest, h.layout_digest, SHA256_LEN);
	bytes = ov_words(ov->blocks) * sizeof(uint64_t);
	ov->words = malloc(bytes);
	if (!ov->words)
		return -ENOMEM;
	ret = fs_pread_full(ov->state_fd, ov->words, bytes, OV_STATE_HDR);
	if (!ret && !ov_bits_valid(ov->words, ov->blocks, &ov->dirty, &ov->zero))
		ret = why_set(why, why_len, -EBADMSG, "invalid block state or padding in the state "
			      "file (file corrupt)");
	return ret;
}

/*
 * The overlay's files are opened without following a symbolic link (O_NOFOLLOW: a link
 * planted at the path must not redirect the writes elsewhere) and without blocking on a
 * FIFO planted there (O_NONBLOCK, cleared at once: io_uring would honour it; the files
 * are then checked to be regular with fstat).
 */
int ov_open_file(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode), fl;

	if (fd >= 0 && ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)) {
		int err = errno;

		close(fd);
		errno = err;
		return -1;
	}
	return fd;
}

int ov_live_path(const char *path, char *buf, size_t len)
{
	return snprintf(buf, len, "%s.live", path) >= (int)len ? -ENAMETOOLONG : 0;
}

int ov_put_words(int fd, const uint64_t *words, size_t a, size_t b)
{
	return fs_pwrite_full(fd, words + a, (b - a) * sizeof(uint64_t),
			      (off_t)(OV_STATE_HDR + a * sizeof(uint64_t)));
}
