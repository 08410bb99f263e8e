/* SPDX-License-Identifier: MIT */
/*
 * The live state file, OVERLAY.live: the overlay's block states now, while OVERLAY.state
 * holds them as of the last flush (docs/reliability.md, docs/formats.md).
 *
 * Why two files: between flushes the kernel writes pages back in any order. Were a write's
 * change of state (clean to dirty) in OVERLAY.state, the page holding it could reach the
 * disk before the data, and after a host crash the block would read as zeros, neither its
 * old content nor its new. So a writer writes every change of state to OVERLAY.live at
 * once (no sync: a killed server loses nothing the kernel has) and into OVERLAY.state only
 * when a flush has made the data durable (ov_flush.c: fdatasync of OVERLAY, then the changed
 * words of OVERLAY.state, then its fdatasync). So every word OVERLAY.state holds, synced or
 * not, is of data that was synced: a writer syncs it when it opens (a server killed inside
 * a flush may have left words there unsynced), and from then on knows what it holds.
 *
 * Which one to believe: OVERLAY.live names the kernel's boot id and the instance of the
 * state file it goes with. Opened in the same boot, the page cache holds every write the
 * dead server gave the kernel, data and states: OVERLAY.live is the truth. In another boot
 * (the host crashed or restarted), pages of either file may be lost: OVERLAY.state is the
 * truth, and the changes since the last flush are dropped; their blocks read as they did
 * at that flush (a block first written since then: the base again).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/boot_id.h"
#include "../../common/crc32c.h"
#include "../../common/fsutil.h"
#include "overlay_int.h"


static uint32_t live_crc(const struct ov_live_header *hdr)
{
	struct ov_live_header h = *hdr;

	h.header_crc = 0;
	return crc32c(~0u, &h, sizeof(h));
}

/* The header says: written in this boot, for this state file. */
static bool live_header_ours(const struct ov_live_header *h, const struct overlay *ov,
			     const uint8_t boot[BOOT_ID_LEN])
{
	return !memcmp(h->magic, OV_LIVE_MAGIC, sizeof(h->magic)) &&
	       h->version == OV_LIVE_VERSION && !h->flags && h->header_crc == live_crc(h) &&
	       ov->instance && h->instance == ov->instance && h->block_count == ov->blocks &&
	       !memcmp(h->boot_id, boot, BOOT_ID_LEN);
}

/*
 * fd's states into ov->words when its header is ours (1); 0 when it is not (none yet, one
 * of another boot or another state file, a start that was interrupted: the header comes
 * last); -EBADMSG when ours but damaged.
 */
static int live_load(struct overlay *ov, int fd, const uint8_t boot[BOOT_ID_LEN],
		     char *why, size_t why_len)
{
	size_t bytes = ov_words(ov->blocks) * sizeof(uint64_t);
	struct ov_live_header h;
	uint64_t *words, dirty, zero;
	struct stat st;
	int ret;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode))
		return why_set(why, why_len, -EBADMSG, "live state file is not a regular file");
	if ((uint64_t)st.st_size < sizeof(h))
		return 0;
	ret = fs_pread_full(fd, &h, sizeof(h), 0);
	if (ret || !live_header_ours(&h, ov, boot))
		return ret;
	if ((uint64_t)st.st_size != OV_STATE_HDR + bytes)
		return why_set(why, why_len, -EBADMSG, "live state file of the wrong size (file corrupt)");
	words = malloc(bytes);
	if (!words)
		return -ENOMEM;
	ret = fs_pread_full(fd, words, bytes, OV_STATE_HDR);
	if (!ret && !ov_bits_valid(words, ov->blocks, &dirty, &zero))
		ret = why_set(why, why_len, -EBADMSG, "invalid block state or padding in the live "
			      "state file (file corrupt)");
	if (ret) {
		free(words);
		return ret;
	}
	free(ov->words);
	ov->words = words;
	ov->dirty = dirty;
	ov->zero = zero;
	return 1;
}


/* The words of words that are not 0 to their places in a bitmap file, a run at a time. */
static int put_nonzero(int fd, const uint64_t *words, size_t nw)
{
	int ret = 0;

	for (size_t w = 0, end, z; w < nw && !ret; w = z) {
		if (!words[w]) {
			z = w + 1;
			continue;
		}
		for (end = w + 1, z = w + 1; z < nw && z - end < OV_RUN_GAP; z++)
			if (words[z])
				end = z + 1;
		ret = ov_put_words(fd, words, w, end);
	}
	return ret;
}

/*
 * The bitmap of a state or live file allocated (best effort): a change of state written
 * later, into a hole, would need room the data may have taken by then (ENOSPC on a full
 * filesystem, for a write or a flush that needs none).
 */
static void bitmap_reserve(int fd, size_t nw)
{
	/* failing (EOPNOTSUPP, ENOSPC), the room is taken when a change comes, as before */
	(void)fallocate(fd, FALLOC_FL_KEEP_SIZE, OV_STATE_HDR, (off_t)(nw * sizeof(uint64_t)));
}

/* The reason of a live file that found no room (it names a size). */
static int live_no_room(const struct overlay *ov, int ret, uint64_t bytes, char *why,
			size_t why_len)
{
	const char *base = strrchr(ov->path, '/');

	return why_set(why, why_len, ret, "no room for %s.live (%llu bytes)",
		       base ? base + 1 : ov->path, (unsigned long long)bytes);
}

/*
 * fd made the live file of this boot and instance, holding ov->words: its header made
 * invalid first and written last, so a start cut short leaves a file no open believes.
 * One of the right size is rewritten in place, over the room it holds (a full filesystem
 * does not stop a restart); any other is emptied and allocated whole before its words
 * are written, so that a change of state never needs room. -ENOSPC (-EDQUOT): why says
 * how much room it needs.
 */
static int live_start(struct overlay *ov, int fd, const uint8_t boot[BOOT_ID_LEN],
		      uint64_t instance, char *why, size_t why_len)
{
	static const struct ov_live_header invalid;
	size_t nw = ov_words(ov->blocks);
	uint64_t bytes = OV_STATE_HDR + (uint64_t)nw * sizeof(uint64_t);
	struct ov_live_header h = { .version = OV_LIVE_VERSION };
	struct stat st;
	int ret;

	if (fstat(fd, &st) < 0)
		return -errno;
	if ((uint64_t)st.st_size == bytes) {
		ret = fs_pwrite_full(fd, &invalid, sizeof(invalid), 0);
		if (!ret)
			ret = ov_put_words(fd, ov->words, 0, nw);
	} else if (ftruncate(fd, 0) < 0) {
		ret = -errno;
	} else if (fallocate(fd, 0, 0, (off_t)bytes) == 0) {
		ret = put_nonzero(fd, ov->words, nw);
	} else if (errno == EOPNOTSUPP) { /* a filesystem that cannot: room taken as written */
		ret = ftruncate(fd, (off_t)bytes) < 0 ? -errno : ov_put_words(fd, ov->words, 0, nw);
	} else {
		ret = -errno;
	}
	if (!ret) {
		memcpy(h.magic, OV_LIVE_MAGIC, sizeof(h.magic));
		h.block_count = ov->blocks;
		h.instance = instance;
		memcpy(h.boot_id, boot, BOOT_ID_LEN);
		h.header_crc = live_crc(&h);
		ret = fs_pwrite_full(fd, &h, sizeof(h), 0);
	}
	return ret == -ENOSPC || ret == -EDQUOT ? live_no_room(ov, ret, bytes, why, why_len) : ret;
}

/* An open(2) of OVERLAY.live failed. */
static int live_open_failed(char *why, size_t why_len)
{
	return errno == ELOOP ? why_set(why, why_len, -EBADMSG,
					"live state file path is a symbolic link (refused)")
			      : -errno;
}

static int boot_failed(int ret, char *why, size_t why_len)
{
	return why_set(why, why_len, ret, "cannot read the kernel's boot id (" BOOT_ID_PATH ")");
}

/* A reader: the live file's states if it is of this boot and this state file. */
static int live_open_reader(struct overlay *ov, const char *path, char *why, size_t why_len)
{
	uint8_t boot[BOOT_ID_LEN];
	int fd = ov_open_file(path, O_RDONLY, 0), ret;

	if (fd < 0)
		return errno == ENOENT ? 0 : live_open_failed(why, why_len);
	ret = boot_id_read(boot);
	if (ret)
		ret = boot_failed(ret, why, why_len);
	else
		ret = live_load(ov, fd, boot, why, why_len);
	close(fd);
	return ret < 0 ? ret : 0;
}

/* A writer's words: durable (as OVERLAY.state holds them), touched (none). */
static int live_alloc(struct overlay *ov)
{
	size_t nw = ov_words(ov->blocks);

	ov->durable = malloc(nw * sizeof(uint64_t));
	ov->touched = calloc(ov_bitwords(nw), sizeof(uint64_t));
	ov->touched_sum = calloc(ov_bitwords(ov_bitwords(nw)), sizeof(uint64_t));
	if (!ov->durable || !ov->touched || !ov->touched_sum)
		return -ENOMEM;
	memcpy(ov->durable, ov->words, nw * sizeof(uint64_t));
	return 0;
}

void ov_live_free(struct overlay *ov)
{
	if (ov->live_fd >= 0)
		close(ov->live_fd);
	free(ov->durable);
	free(ov->touched);
	free(ov->touched_sum);
}

/* A writer's live file: believed, or started anew; a version 1 state file upgraded. */
static int live_open_writer(struct overlay *ov, const char *path, char *why, size_t why_len)
{
	uint8_t boot[BOOT_ID_LEN];
	uint64_t instance = ov->instance;
	int ret = boot_id_read(boot), believed;

	if (ret)
		return boot_failed(ret, why, why_len);
	ret = live_alloc(ov);
	if (ret)
		return ret;
	ov->live_fd = ov_open_file(path, O_RDWR | O_CREAT, FS_DATA_MODE);
	if (ov->live_fd < 0)
		return live_open_failed(why, why_len);
	bitmap_reserve(ov->state_fd, ov_words(ov->blocks));
	/* never for version 1 (instance 0) */
	believed = live_load(ov, ov->live_fd, boot, why, why_len);
	if (believed < 0)
		return believed;
	if (!believed && !instance)
		ret = ov_instance_new(&instance);
	if (!believed && !ret)
		ret = live_start(ov, ov->live_fd, boot, instance, why, why_len);
	/*
	 * Version 1 (it never had a live file): made version 2 once the live file is ready.
	 * Else what OVERLAY.state holds made durable: a server killed in a flush, between
	 * its words and their sync, left them in the page cache only, and they are durable
	 * (durable) from now on; each is of data a flush synced before.
	 */
	if (!ret)
		ret = ov->instance ? ov_sync(ov, OV_STATE) : ov_state_upgrade(ov, instance);
	if (ret || !believed)
		return ret;
	bitmap_reserve(ov->live_fd, ov_words(ov->blocks));
	/* a server that died in this boot: what it had not flushed is to be flushed */
	for (size_t w = 0; w < ov_words(ov->blocks); w++)
		if (ov->words[w] != ov->durable[w])
			ov_touch(ov, w);
	return 0;
}

int ov_live_open(struct overlay *ov, char *why, size_t why_len)
{
	char path[PATH_MAX];
	int ret = ov_live_path(ov->path, path, sizeof(path));

	if (ret)
		return ret;
	return ov->read_only ? live_open_reader(ov, path, why, why_len)
			     : live_open_writer(ov, path, why, why_len);
}

int ov_live_mark(struct overlay *ov, size_t first, size_t last)
{
	for (size_t w = first; w <= last; w++)
		ov_touch(ov, w);
	return fs_pwrite_full(ov->live_fd, ov->words + first, (last - first + 1) * sizeof(uint64_t),
			      (off_t)(OV_STATE_HDR + first * sizeof(uint64_t)));
}
