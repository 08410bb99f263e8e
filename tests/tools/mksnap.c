/* SPDX-License-Identifier: MIT */
/*
 * mksnap: a VM snapshot in a store without a VM, for the tests of publishing and fetching
 * snapshots (tests/integration/t_snapshot_publish.sh). It writes what `lazyblk snapshot`
 * writes into a store — guest RAM as chunks and its page map (vmsnap/ramstore.h), a
 * vm.state chunk, the snapshot document (vmsnap/doc.h) as STORE/snapshots/<hex>.json and
 * DIR/snapshot.json — from synthetic RAM: page p holds bytes derived from (seed, p), every
 * third page is zero. With --layout, the disk is that layout (copied to
 * STORE/layouts/<digest hex>.layout, as a snapshot's committed disk is, and its
 * FILE.manifest, if any, to STORE/layouts/<digest hex>.manifest). Prints the
 * document's sha256 (hex). Test tool only: linked against the library, never installed.
 *
 * fetch: the library's fetch of a snapshot by reference (layout/snap_ref.h: snap_fetch,
 * what run --restore REF calls) into a store, printing what it returned as one JSON object
 * (id, doc, layout, manifest, chunk_url, fetched, mem, nmap) or its one line on failure.
 *
 *   mksnap make --store STORE -o DIR [--layout FILE] [--mem MIB] [--seed N]
 *   mksnap fetch REF --store STORE
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../cas/store.h"
#include "../../common/fsutil.h"
#include "../../layout/layout.h"
#include "../../layout/snap_ref.h"
#include "../../vmsnap/doc.h"
#include "../../vmsnap/ramstore.h"
#include "../../vmsnap/snapfile.h"

static void die(const char *what, int err, const char *why)
{
	fprintf(stderr, "mksnap: %s: %s\n", what, why && why[0] ? why : strerror(-err));
	exit(1);
}

static uint8_t *ram_make(uint64_t size, unsigned seed)
{
	uint8_t *ram = calloc(1, size);

	if (!ram)
		die("RAM", -ENOMEM, NULL);
	for (uint64_t p = 0; p < size / 4096; p++) {
		uint32_t x = seed * 2654435761u ^ (uint32_t)p * 40503u;

		if (p % 3 == 0)
			continue;
		for (size_t i = 0; i < 4096; i += 4) {
			x = x * 1664525u + 1013904223u;
			memcpy(ram + p * 4096 + i, &x, 4);
		}
	}
	return ram;
}

/* The disk: the layout's digest and size into d, the file copied into STORE/layouts/. */
static void disk_add(const char *store_dir, const char *path, struct snapdoc *d)
{
	char why[WHY_MAX] = "", dest[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	struct layout *l;
	uint8_t *buf;
	size_t len;
	int ret;

	ret = layout_open(path, &l, why, sizeof(why));
	if (ret)
		die(path, ret, why);
	d->has_disk = true;
	memcpy(d->layout, l->digest, SHA256_LEN);
	d->disk_size = l->hdr.block_count * 4096ull;
	layout_close(l);
	sha256_to_hex(d->layout, hex);
	snprintf(dest, sizeof(dest), "%s/layouts", store_dir);
	fs_mkdir_p(dest, 0755);
	snprintf(dest, sizeof(dest), "%s/layouts/%s.layout", store_dir, hex);
	ret = fs_read_file(path, &buf, &len);
	if (!ret)
		ret = fs_write_file_atomic(dest, buf, len, FS_DATA_MODE);
	if (ret)
		die(dest, ret, NULL);
	free(buf);
	/* its manifest beside it, as STORE/layouts/ holds an image's (FILE.layout -> .manifest) */
	snprintf(dest, sizeof(dest), "%.*s.manifest", (int)(strlen(path) - 7), path);
	if (fs_read_file(dest, &buf, &len))
		return;
	snprintf(dest, sizeof(dest), "%s/layouts/%s.manifest", store_dir, hex);
	ret = fs_write_file_atomic(dest, buf, len, FS_DATA_MODE);
	if (ret)
		die(dest, ret, NULL);
	free(buf);
}

static int fetch_main(int argc, char **argv)
{
	struct remote_opts ro = { 0 };
	struct snap_fetched f;
	char why[WHY_MAX + 512] = "", hex[SHA256_HEX_LEN + 1];
	int ret;

	if (argc != 5 || strcmp(argv[3], "--store")) {
		fprintf(stderr, "usage: mksnap fetch REF --store STORE\n");
		return 2;
	}
	ro.url = argv[2];
	ret = snap_fetch(&ro, argv[4], &f, why, sizeof(why));
	if (ret) {
		fprintf(stderr, "lazyblk: %s\n", why[0] ? why : strerror(-ret));
		return 1;
	}
	sha256_to_hex(f.id, hex);
	printf("{\"id\":\"%s\",\"doc\":\"%s\",\"layout\":\"%s\",\"manifest\":\"%s\","
	       "\"chunk_url\":\"%s\",\"fetched\":%u,\"mem\":%llu,\"nmap\":%u}\n", hex, f.doc,
	       f.layout ? f.layout : "", f.manifest ? f.manifest : "", f.chunk_url, f.fetched,
	       (unsigned long long)f.d.mem_size, f.d.nmap);
	snap_fetched_free(&f);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' }, { "out", required_argument, NULL, 'o' },
		{ "layout", required_argument, NULL, 'l' }, { "mem", required_argument, NULL, 'm' },
		{ "seed", required_argument, NULL, 'S' }, { 0 },
	};
	const char *store_dir = NULL, *out = NULL, *layout = NULL;
	struct ramstore_opts ro = { 0 };
	struct ramstore_result res;
	struct snapdoc d = { 0 };
	struct rammap *m = NULL;
	char why[WHY_MAX] = "", hex[SHA256_HEX_LEN + 1], *json;
	uint8_t state[6000], id[SHA256_LEN], *ram;
	unsigned seed = 1, mib = 8;
	size_t len;
	int c, ret;

	if (argc > 1 && !strcmp(argv[1], "fetch"))
		return fetch_main(argc, argv);
	if (argc < 2 || strcmp(argv[1], "make")) {
		fprintf(stderr, "usage: mksnap make|fetch ...\n");
		return 2;
	}
	optind = 2;
	while ((c = getopt_long(argc, argv, "s:o:l:m:S:", opts, NULL)) != -1) {
		switch (c) {
		case 's': store_dir = optarg; break;
		case 'o': out = optarg; break;
		case 'l': layout = optarg; break;
		case 'm': mib = (unsigned)atoi(optarg); break;
		case 'S': seed = (unsigned)atoi(optarg); break;
		default: return 2;
		}
	}
	if (!store_dir || !out || !mib) {
		fprintf(stderr, "usage: mksnap make --store STORE -o DIR [--layout FILE] [--mem MIB] "
			"[--seed N]\n");
		return 2;
	}
	ret = store_open(store_dir, true, &ro.store);
	if (ret)
		die(store_dir, ret, NULL);
	ram = ram_make((uint64_t)mib << 20, seed);
	ret = ramstore_write(&ro, ram, (uint64_t)mib << 20, &m, &res, why, sizeof(why));
	if (ret)
		die("ramstore_write", ret, why);
	d.created = (uint64_t)time(NULL);
	d.mem_size = (uint64_t)mib << 20;
	d.ncpus = 1;
	memset(d.cpu_sig, 0x42, sizeof(d.cpu_sig));
	snprintf(d.cpu_model, sizeof(d.cpu_model), "mksnap test CPU");
	sha256_buf("not a kernel", 12, d.kernel);
	for (size_t i = 0; i < sizeof(state); i++)
		state[i] = (uint8_t)(i * 7 + seed);
	ret = ramstore_put_blob(ro.store, state, sizeof(state), &d.state, why, sizeof(why));
	if (!ret)
		ret = ramstore_put_map(ro.store, m, &d, why, sizeof(why));
	if (ret)
		die("store", ret, why);
	if (layout)
		disk_add(store_dir, layout, &d);
	ret = snapdoc_build(&d, &json, &len);
	if (ret)
		die("snapdoc_build", ret, NULL);
	fs_mkdir_p(out, 0755);
	ret = snapfile_write(store_dir, out, json, len, id, why, sizeof(why));
	if (ret)
		die("snapfile_write", ret, why);
	sha256_to_hex(id, hex);
	printf("%s\n", hex);
	free(json);
	free(ram);
	rammap_free(m);
	store_close(ro.store);
	return 0;
}
