/* SPDX-License-Identifier: MIT */
/*
 * A VM snapshot's RAM page map (vmsnap/rammap.c; docs/formats.md, "RAM page map"), as a
 * restore fetches it from a store or a remote: rammap_parse. What it accepts is canonical:
 * encoded again it is the same bytes; made canonical again (rammap_finish) it does not
 * change; every page's chunk and slot are in range and the user index lists exactly the
 * pages of each chunk, in order.
 *
 * Input: the map's bytes.
 */
#include "fuzz.h"
#include "../vmsnap/rammap.h"

static void check_index(const struct rammap *m)
{
	uint64_t k = 0;

	if (m->user_off[0] != 0 || m->user_off[m->nchunks] != m->nonzero)
		abort();
	for (uint32_t c = 0; c < m->nchunks; c++) {
		for (uint32_t u = m->user_off[c]; u < m->user_off[c + 1]; u++, k++) {
			uint32_t p = m->users[u];

			if (p >= m->npages || m->pages[p].chunk != c + 1 ||
			    m->pages[p].slot >= m->chunks[c].npages ||
			    (u > m->user_off[c] && m->users[u - 1] >= p))
				abort(); /* the index lies */
		}
	}
	if (k != m->nonzero)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct rammap *m;
	char why[WHY_MAX] = "";
	uint8_t *buf;
	size_t len;
	int ret;

	fuzz_dir();
	ret = rammap_parse(data, size, &m, why, sizeof(why));
	if (fuzz_result("rammap_parse", ret, why)) {
		if (m || (!why[0] && ret != -ENOMEM))
			abort(); /* a refusal says why, and hands nothing back */
		return 0;
	}
	check_index(m);
	if (!rammap_encode(m, &buf, &len)) {
		if (len != size || memcmp(buf, data, size))
			abort(); /* not canonical: parse then encode changed the bytes */
		free(buf);
	}
	if (!rammap_finish(m)) {
		check_index(m);
		if (!rammap_encode(m, &buf, &len)) {
			if (len != size || memcmp(buf, data, size))
				abort(); /* an accepted map was not canonical */
			free(buf);
		}
	}
	rammap_free(m);
	return 0;
}
