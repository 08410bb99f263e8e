/* SPDX-License-Identifier: MIT */
/*
 * The delta reader (blkd/overlay/delta.c: overlay_apply_delta, `lazyblk overlay apply`):
 * the file is checked whole and turned into a new overlay. The header crc32c and the
 * trailing sha256 are recomputed first, and the layout digest and disk size the caller
 * expects are taken from the input's own header (so the fuzzer gets past "belongs to
 * another layout"), the size only up to DISK_MAX: a larger one is refused as another size.
 */
#include "fuzz.h"
#include "../blkd/overlay/delta.h"
#include "../blkd/overlay/overlay.h"

#define DISK_MAX (256ull << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	uint8_t digest[SHA256_LEN] = { 0 };
	char delta[PATH_MAX], ov[PATH_MAX], state[PATH_MAX];
	char why[WHY_MAX] = "";
	uint64_t disk_bytes;

	fuzz_fix_crc(buf, size, sizeof(struct delta_header),
		     offsetof(struct delta_header, header_crc));
	fuzz_fix_sha_trailer(buf, size);
	disk_bytes = fuzz_le64(buf, size, offsetof(struct delta_header, disk_bytes));
	if (disk_bytes > DISK_MAX)
		disk_bytes = DISK_BLOCK;
	if (size >= offsetof(struct delta_header, layout_digest) + SHA256_LEN)
		memcpy(digest, buf + offsetof(struct delta_header, layout_digest), SHA256_LEN);
	fuzz_write_file(fuzz_path(delta, sizeof(delta), "delta"), buf, size);
	free(buf);
	fuzz_path(ov, sizeof(ov), "overlay");
	fuzz_path(state, sizeof(state), "overlay.state");
	fuzz_result("overlay_apply_delta",
		    overlay_apply_delta(delta, ov, digest, disk_bytes, why, sizeof(why)), why);
	unlink(ov);
	unlink(state);
	return 0;
}
