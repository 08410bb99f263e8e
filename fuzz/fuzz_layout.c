/* SPDX-License-Identifier: MIT */
/*
 * The layout reader (ext4gen/layout.c: layout_open on a file), then the lookups a server
 * makes on it: the metadata block of each run's first and last disk block, the data run
 * and metadata run at positions across the disk. The body sha256 and the header crc32c
 * are recomputed first (fuzz.h), so the runs behind them are what gets fuzzed. A version 2
 * layout (a layer over a parent) has its header, parent record, hint and runs checked; its
 * parent is not found, so the chain merge is left to tests/unit/test_layout_chain.c.
 */
#include "fuzz.h"
#include "../ext4gen/layout.h"

/* The bytes header_crc covers: version 2 adds the parent record after the header. */
static size_t hdr_len(const uint8_t *buf)
{
	uint32_t version;

	memcpy(&version, buf + offsetof(struct layout_header, version), sizeof(version));
	return sizeof(struct layout_header) +
	       (version == LAYOUT_VERSION_PARENT ? sizeof(struct layout_parent) : 0);
}
#define RUNS_MAX 256 /* runs looked up per input */

static void walk(const struct layout *l)
{
	static uint8_t block[LAYOUT_BLOCK];
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
		sink += layout_data_run_at(l, b * LAYOUT_BLOCK);
		layout_read_meta(l, b, block);
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	const char *why = NULL;
	struct layout *l;
	char path[PATH_MAX];

	if (size >= LAYOUT_BLOCK) {
		sha256_buf(buf + LAYOUT_BLOCK, size - LAYOUT_BLOCK,
			   buf + offsetof(struct layout_header, body_sha256));
		fuzz_fix_crc(buf, size, hdr_len(buf), offsetof(struct layout_header, header_crc));
	}
	fuzz_write_file(fuzz_path(path, sizeof(path), "layout"), buf, size);
	free(buf);
	if (fuzz_result("layout_open", layout_open(path, &l, &why), why))
		return 0;
	walk(l);
	layout_close(l);
	return 0;
}
