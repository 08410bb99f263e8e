/* SPDX-License-Identifier: MIT */
/*
 * The overlay state reader (blkd/overlay/overlay.c: overlay_open_existing, what `overlay
 * show`, `snapshot` and a server restarting on an overlay run), then its users: the runs
 * of equal state across the disk, a read of the first dirty block, and a snapshot of it
 * to a delta (`lazyblk snapshot`). The header crc32c is recomputed first; the data file
 * is made (sparse) the size the header says, up to DISK_MAX (past it: empty, refused).
 * Beside it, OVERLAY.live of this boot (boot_id_set_for_test) for the state file's
 * instance and block count, holding the same bitmap bytes: the live file's reader runs on
 * every input whose state header is of version 2.
 */
#include "fuzz.h"
#include "../blkd/overlay/overlay.h"
#include "../blkd/overlay/overlay_int.h"
#include "../common/boot_id.h"
#include "../common/crc32c.h"

#define DISK_MAX (256ull << 20)
#define RUNS_MAX 4096 /* runs walked per input */

static void walk(struct overlay *ov)
{
	static uint8_t block[DISK_BLOCK];
	uint64_t n = overlay_blocks(ov), b = 0;
	enum ov_state st;

	for (unsigned i = 0; b < n && i < RUNS_MAX; i++) {
		uint64_t len = overlay_run(ov, b, &st);

		if (!len || len > n - b)
			abort(); /* a run is >= 1 block and inside the disk */
		if (st == OV_DIRTY)
			overlay_read(ov, b, 1, block);
		b += len;
	}
}

/* OVERLAY.live for the state file buf: a header naming this boot, then buf's bitmap. */
static void live_write(const uint8_t *buf, size_t size)
{
	static const uint8_t boot[BOOT_ID_LEN] = { 'f', 'u', 'z', 'z' };
	struct ov_live_header h = { .magic = OV_LIVE_MAGIC, .version = OV_LIVE_VERSION };
	char path[PATH_MAX];
	uint8_t *live;

	if (size < sizeof(struct ov_state_header))
		return;
	boot_id_set_for_test(boot);
	h.block_count = fuzz_le64(buf, size, offsetof(struct ov_state_header, block_count));
	h.instance = fuzz_le64(buf, size, offsetof(struct ov_state_header, instance));
	memcpy(h.boot_id, boot, BOOT_ID_LEN);
	h.header_crc = crc32c(~0u, &h, sizeof(h));
	live = calloc(1, size > OV_STATE_HDR ? size : OV_STATE_HDR);
	if (!live)
		abort();
	memcpy(live, &h, sizeof(h));
	if (size > OV_STATE_HDR)
		memcpy(live + OV_STATE_HDR, buf + OV_STATE_HDR, size - OV_STATE_HDR);
	fuzz_write_file(fuzz_path(path, sizeof(path), "ov.live"), live,
			size > OV_STATE_HDR ? size : OV_STATE_HDR);
	free(live);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	char ov_path[PATH_MAX], state[PATH_MAX], delta[PATH_MAX];
	char why[WHY_MAX] = "";
	struct overlay *ov;
	uint64_t disk_bytes;
	int fd;

	fuzz_fix_crc(buf, size, sizeof(struct ov_state_header),
		     offsetof(struct ov_state_header, header_crc));
	disk_bytes = fuzz_le64(buf, size, offsetof(struct ov_state_header, disk_bytes));
	fuzz_write_file(fuzz_path(state, sizeof(state), "ov.state"), buf, size);
	live_write(buf, size);
	free(buf);
	fd = open(fuzz_path(ov_path, sizeof(ov_path), "ov"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || ftruncate(fd, disk_bytes <= DISK_MAX ? (off_t)disk_bytes : 0) < 0)
		abort();
	close(fd);
	if (fuzz_result("overlay_open_existing",
			overlay_open_existing(ov_path, true, &ov, why, sizeof(why)), why))
		return 0;
	walk(ov);
	fuzz_path(delta, sizeof(delta), "ov.delta");
	fuzz_result("overlay_snapshot", overlay_snapshot(ov, delta, why, sizeof(why)), why);
	unlink(delta);
	overlay_close(ov);
	return 0;
}
