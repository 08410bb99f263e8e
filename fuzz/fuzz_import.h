/* SPDX-License-Identifier: MIT */
/*
 * For the import targets: run a whole import (cas/import: import_run, what `lazyblk
 * import` runs) of a source made from the input into a fresh store, then remove the store;
 * and the tar header checksums recomputed on a mutated archive (fuzz_fix_tar).
 */
#ifndef LZ_FUZZ_IMPORT_H
#define LZ_FUZZ_IMPORT_H

#include "fuzz.h"
#include "../cas/chunk.h"
#include "../common/fsutil.h"
#include "../cas/import/import.h"

/*
 * Import src into DIR/store (manifest DIR/out.manifest, removed after). The store is kept
 * for STORE_RUNS imports (making its 256 directories costs more than most imports): a
 * chunk an earlier input stored is found there, as in a real store.
 */
#define STORE_RUNS 1000

static inline void fuzz_import(const char *src)
{
	static unsigned runs;
	char store[PATH_MAX], out[PATH_MAX], why[512];
	struct import_opts o = {
		.src = src,
		.store_dir = fuzz_path(store, sizeof(store), "store"),
		.output = fuzz_path(out, sizeof(out), "out.manifest"),
		.chunk_size = CHUNK_SIZE_MIN * 4,
		.pack_max = CHUNK_SIZE_MIN,
		.level = 1,
		.threads = 1,
	};
	struct import_result res;

	fuzz_result("import_run", import_run(&o, &res, why, sizeof(why)), why);
	if (++runs % STORE_RUNS == 0)
		fuzz_rmtree(store);
	unlink(out);
}

static uint64_t tar_octal(const uint8_t *p, size_t n, bool *ok)
{
	uint64_t v = 0;
	size_t i = 0;

	*ok = true;
	if (p[0] & 0x80) { /* GNU base-256 */
		for (i = 1; i < n; i++) {
			if (v >> 55) {
				*ok = false;
				return 0;
			}
			v = v << 8 | p[i];
		}
		return v;
	}
	while (i < n && p[i] == ' ')
		i++;
	for (; i < n && p[i] >= '0' && p[i] <= '7'; i++)
		v = v << 3 | (uint64_t)(p[i] - '0');
	return v;
}

/*
 * Recompute the checksum of every header of the tar stream in buf[0, len): an archive
 * writer computes them, so the fuzzer should not have to. Headers are found by following
 * the sizes; a member whose data is itself a tar (a layer of a docker-archive) gets the
 * same treatment, down to depth 2.
 */
static inline void fuzz_fix_tar(uint8_t *buf, size_t len, int depth)
{
	size_t off = 0;

	while (off + 512 <= len) {
		uint8_t *h = buf + off;
		unsigned sum = 0;
		uint64_t size;
		bool ok;

		if (h[0] == 0)
			break; /* the end-of-archive blocks */
		memset(h + 148, ' ', 8);
		for (int i = 0; i < 512; i++)
			sum += h[i];
		snprintf((char *)h + 148, 8, "%06o", sum);
		h[155] = ' ';
		size = tar_octal(h + 124, 12, &ok);
		if (!ok || size > len - off - 512)
			break;
		if (depth < 2 && size >= 1024 && !memcmp(h + 512 + 257, "ustar", 5))
			fuzz_fix_tar(h + 512, (size_t)size, depth + 1);
		off += 512 + (size_t)((size + 511) & ~511ull);
	}
}

#endif
