/* SPDX-License-Identifier: MIT */
/*
 * ext4 synthesis from a hostile manifest (ext4gen/mkfs_run.c: mkfs_run on what manifest_parse
 * accepted): the tree, hard links, xattrs and ACLs, times, sizes and holes an image may
 * claim. Whatever mkfs accepts must give a layout that layout_open accepts. Seeds: the
 * manifest target's (fuzz/corpus/manifest); the trailing sha256 is recomputed first.
 */
#include "fuzz.h"
#include "../cas/manifest.h"
#include "../layout/layout.h"
#include "../ext4gen/mkfs.h"

static void note(void *arg, enum note_kind kind, const char *line)
{
	(void)arg;
	(void)kind;
	(void)line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct mkfs_opts o = { .journal_size = 4 << 20, .notes = { .fn = note } };
	uint8_t *buf = fuzz_dup(data, size);
	struct mkfs_result res;
	struct manifest *m;
	struct layout *l;
	char why[WHY_MAX] = "";
	char path[PATH_MAX], reason[512];

	fuzz_dir();
	fuzz_fix_sha_trailer(buf, size);
	if (fuzz_result("manifest_parse", manifest_parse(buf, size, &m, why, sizeof(why)), why))
		return 0;
	fuzz_path(path, sizeof(path), "fuzz.layout");
	reason[0] = '\0';
	if (!fuzz_result("mkfs_run", mkfs_run(m, &o, path, &res, reason, sizeof(reason)),
			 reason)) {
		why[0] = '\0';
		if (layout_open(path, &l, why, sizeof(why)))
			abort(); /* mkfs wrote a layout its own reader refuses */
		layout_close(l);
	}
	unlink(path);
	manifest_free(m);
	return 0;
}
