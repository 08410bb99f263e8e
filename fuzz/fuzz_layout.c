/* SPDX-License-Identifier: MIT */
/*
 * The layout reader (layout/read.c and chain.c: layout_open on a file), then the lookups a server
 * makes on it: the metadata block of each run's first and last disk block, the data run
 * and metadata run at positions across the disk. The body sha256 and the header crc32c
 * are recomputed first (fuzz.h), so the runs behind them are what gets fuzzed. A layer
 * input (a layout over a parent) gets a base of its disk size written where its parent is
 * looked for, and that base's digest as its parent digest, so the chain merge is fuzzed too
 * (the hint is the input's: a file it names that is not the base is refused).
 */
#include "fuzz.h"
#include "../layout/layout.h"

/* The bytes header_crc covers: a layer (version 2, 3 with the flag) adds the parent record. */
static size_t hdr_len(const uint8_t *buf)
{
	uint32_t version, flags;

	memcpy(&version, buf + offsetof(struct layout_header, version), sizeof(version));
	memcpy(&flags, buf + offsetof(struct layout_header, flags), sizeof(flags));
	return sizeof(struct layout_header) +
	       (version != LAYOUT_VERSION_V1 && (flags & LAYOUT_F_PARENT) ?
		sizeof(struct layout_parent) : 0);
}
#define RUNS_MAX 256 /* runs looked up per input */

static void walk(const struct layout *l)
{
	static uint8_t block[DISK_BLOCK];
	uint64_t n = l->hdr.block_count;
	volatile size_t sink = 0;

	for (uint64_t i = 0; i < l->hdr.meta_run_count && i < RUNS_MAX; i++) {
		const struct layout_meta_run *r = &l->meta_runs[i];

		layout_read_meta(l, r->lba, block);
		layout_read_meta(l, r->lba + r->count - 1, block);
		sink += layout_meta_run_at(l, r->lba);
	}
	for (uint64_t i = 0; i < l->hdr.data_run_count && i < RUNS_MAX; i++) {
		const struct layout_data_run *r = &l->data_runs[i];

		sink += layout_data_run_at(l, layout_data_run_pos(r));
		sink += l->chunks[r->chunk][0];
	}
	for (unsigned k = 0; k <= 16; k++) {
		uint64_t b = n / 16 * k;

		sink += layout_meta_run_at(l, b);
		sink += layout_data_run_at(l, b * DISK_BLOCK);
		layout_read_meta(l, b, block);
	}
	(void)sink;
}

/*
 * For a layer input: a base of its disk size (metadata, a data run over several blocks,
 * packed tails), written where the input's parent is looked for (DIR/<digest>.layout), its
 * digest patched into the input, so that the chain merge runs on the input's runs. 0 and
 * base named, or -1 (no base: the input has no parent, or a disk too large to bother).
 */
static int base_make(uint8_t *buf, size_t size, char base[PATH_MAX])
{
	static const uint8_t meta[DISK_BLOCK * 2];
	uint8_t d[SHA256_LEN] = { 7 }, digest[SHA256_LEN];
	char tmp[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	struct layout_writer *w;
	uint64_t blocks;
	int ret;

	if (size < DISK_BLOCK || hdr_len(buf) == sizeof(struct layout_header))
		return -1;
	memcpy(&blocks, buf + offsetof(struct layout_header, block_count), sizeof(blocks));
	if (blocks < 8 || blocks > (1u << 20))
		return -1;
	if (layout_writer_new(fuzz_path(tmp, sizeof(tmp), "base.layout"), blocks, &w))
		abort();
	ret = layout_add_meta(w, 0, meta, 2);
	if (!ret)
		ret = layout_add_data(w, 2 * DISK_BLOCK + 100, 3 * DISK_BLOCK, d, 0);
	if (!ret)
		ret = layout_add_data(w, 6 * DISK_BLOCK, 300, d, 5);
	if (!ret)
		ret = layout_add_data(w, 6 * DISK_BLOCK + 1000, 3000, d, 50000);
	if (ret || layout_writer_finish(w, NULL, NULL, 65536, digest))
		abort();
	layout_writer_free(w);
	sha256_to_hex(digest, hex);
	fuzz_path(base, PATH_MAX, hex);
	strcat(base, ".layout");
	if (rename(tmp, base))
		abort();
	memcpy(buf + sizeof(struct layout_header), digest, SHA256_LEN);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	char why[WHY_MAX] = "";
	struct layout *l;
	char path[PATH_MAX], base[PATH_MAX];
	bool has_base = base_make(buf, size, base) == 0;

	if (size >= DISK_BLOCK) {
		sha256_buf(buf + DISK_BLOCK, size - DISK_BLOCK,
			   buf + offsetof(struct layout_header, body_sha256));
		fuzz_fix_crc(buf, size, hdr_len(buf), offsetof(struct layout_header, header_crc));
	}
	fuzz_write_file(fuzz_path(path, sizeof(path), "layout"), buf, size);
	free(buf);
	if (fuzz_result("layout_open", layout_open(path, &l, why, sizeof(why)), why) == 0) {
		walk(l);
		layout_close(l);
	}
	if (has_base)
		unlink(base);
	return 0;
}
