/* SPDX-License-Identifier: MIT */
/*
 * The manifest reader (cas/manifest.c: manifest_parse, what manifest_load runs on a file's
 * bytes), then what its users walk: every entry's path and link, its xattrs, the pieces of
 * a regular file's data and the offsets between file and data, the totals and the lookup
 * by path, and the image config it carries (oci_config_parse). The trailing sha256 is recomputed first (fuzz.h).
 */
#include "fuzz.h"
#include "../cas/manifest.h"
#include "../cas/oci_config.h"

#define WALK_MAX 4096 /* entries walked per input */

static int piece(void *arg, const struct mf_chunk *c, uint64_t data_off)
{
	uint64_t *sum = arg;

	*sum += c->len + c->off + data_off;
	return 0;
}

static void walk_entry(const struct manifest *m, const struct mf_entry *e)
{
	volatile uint64_t sink = 0;
	uint64_t sum = 0, room;
	const char *p = manifest_path(m, e);

	sink += strlen(p);
	if (e->type == MF_SYMLINK || e->type == MF_HARDLINK)
		sink += strlen(manifest_str(m, e->link_off));
	for (uint32_t i = 0; i < e->xattr_count; i++) {
		const struct mf_xattr *x = &m->xattrs[e->xattr_first + i];

		sink += strlen(manifest_str(m, x->name_off));
		sink += ((const uint8_t *)manifest_str(m, x->value_off))[x->value_len];
	}
	if (e->type == MF_REG) {
		manifest_pieces_in(m, e, 0, UINT64_MAX, piece, &sum);
		sink += manifest_file_to_data(m, e, e->size / 2);
		sink += manifest_data_to_file(m, e, sum / 3, &room) + room;
	}
	if (manifest_find(m, p) == NULL)
		abort(); /* every entry's path is found */
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	struct manifest_totals t;
	struct manifest *m;
	char why[WHY_MAX] = "";
	char cwhy[WHY_MAX] = "";

	fuzz_dir();
	fuzz_fix_sha_trailer(buf, size);
	if (fuzz_result("manifest_parse", manifest_parse(buf, size, &m, why, sizeof(why)), why))
		return 0;
	for (size_t i = 0; i < m->n_entries && i < WALK_MAX; i++)
		walk_entry(m, &m->entries[i]);
	manifest_totals(m, &t);
	if (m->hdr->config_len) {
		struct oci_config c;

		if (!oci_config_parse(manifest_str(m, m->hdr->config_off), m->hdr->config_len,
				      &c, cwhy, sizeof(cwhy)))
			oci_config_free(&c);
	}
	manifest_find(m, "/etc/passwd");
	manifest_free(m);
	return 0;
}
