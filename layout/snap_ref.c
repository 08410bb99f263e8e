/* SPDX-License-Identifier: MIT */
/* A VM snapshot's disk and chunks (snap_ref.h): what push sends and gc keeps. */
#include "snap_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../cas/source.h"
#include "../common/fsutil.h"
#include "../vmsnap/ramstore.h"
#include "../vmsnap/snapfile.h"
#include "layout.h"

/* The directory a snapshot's document is in: snap itself, or its file's directory. */
static void snap_dir(const char *snap, char *buf, size_t len)
{
	struct stat st;

	if (!stat(snap, &st) && S_ISDIR(st.st_mode))
		snprintf(buf, len, "%s", snap);
	else
		fs_dirname(snap, buf, len);
}

int snap_ref_layout(const char *store_dir, const char *snap, const struct snapdoc *d,
		    char **layout, char *why, size_t why_len)
{
	char path[2][PATH_MAX + 80], dir[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	char lw[WHY_MAX] = "";
	struct layout *l;
	int ret;

	*layout = NULL;
	if (!d->has_disk)
		return 0;
	sha256_to_hex(d->layout, hex);
	snap_dir(snap, dir, sizeof(dir));
	snprintf(path[0], sizeof(path[0]), "%s/layouts/%s.layout", store_dir ? store_dir : ".",
		 hex);
	snprintf(path[1], sizeof(path[1]), "%s/%s.layout", dir, hex);
	for (unsigned i = store_dir ? 0 : 1; i < 2; i++) {
		if (access(path[i], F_OK))
			continue;
		ret = layout_open(path[i], &l, lw, sizeof(lw));
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", path[i],
				       lw[0] ? lw : strerror(-ret));
		ret = memcmp(l->digest, d->layout, SHA256_LEN) ? -EBADMSG : 0;
		layout_close(l);
		if (ret)
			return why_set(why, why_len, ret, "%s: not the snapshot's disk layout "
				       "sha256:%s", path[i], hex);
		*layout = strdup(path[i]);
		return *layout ? 0 : -ENOMEM;
	}
	return why_set(why, why_len, -ENOENT, "the snapshot's disk layout sha256:%s is not in "
		       "the store (looked for %s%s%s)", hex, store_dir ? path[0] : "",
		       store_dir ? " and " : "", path[1]);
}

/* The first of the state and the map's pieces a store lacks, named; 0 when all are there. */
static int pieces_present(const struct snapdoc *d, const char *store_dir, char *why,
			  size_t why_len)
{
	char hex[SHA256_HEX_LEN + 1];
	struct store *s;
	int ret;

	ret = store_open(store_dir, false, &s);
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", store_dir, ret == -ENOENT
			       ? "not a lazyblk store (no chunks/ directory)" : strerror(-ret));
	for (unsigned i = 0; !ret && i <= d->nmap; i++) {
		const uint8_t *c = i ? d->map[i - 1].digest : d->state.digest;

		ret = store_has(s, c);
		if (ret == 1) {
			ret = 0;
			continue;
		}
		sha256_to_hex(c, hex);
		if (!ret && i)
			ret = why_set(why, why_len, -ENOENT, "the page map's piece %u (chunk "
				      "sha256:%s) is missing in the store %s", i - 1, hex, store_dir);
		else if (!ret)
			ret = why_set(why, why_len, -ENOENT, "the vm.state chunk sha256:%s is "
				      "missing in the store %s", hex, store_dir);
		else
			why_set(why, why_len, ret, "%s: %s", store_dir, strerror(-ret));
	}
	store_close(s);
	return ret;
}

int snap_ref_ram_chunks(const struct snapdoc *d, const char *store_dir, const char *remote_url,
			struct chunk_refs *r, char *why, size_t why_len)
{
	struct cas_source_opts so = { .store_dir = store_dir, .remote_url = remote_url,
				      .no_plain = true };
	struct cas_source *src = NULL;
	struct rammap *m = NULL;
	char sw[WHY_MAX] = "";
	int ret;

	if (!remote_url && (ret = pieces_present(d, store_dir, why, why_len)))
		return ret;
	ret = cas_source_open(&so, &src, sw, sizeof(sw));
	if (ret)
		return why_set(why, why_len, ret, "%s", sw[0] ? sw : strerror(-ret));
	ret = ramstore_load_map(src, d, &m, sw, sizeof(sw));
	if (ret)
		why_set(why, why_len, ret, "the snapshot's page map: %s", sw[0] ? sw
			: ret == -ENOENT ? "a piece of it is missing" : strerror(-ret));
	else
		ret = ramstore_refs(d, m, &r->d, &r->n, &r->cap);
	rammap_free(m);
	cas_source_close(src);
	return ret;
}

int snap_ref_keep_file(struct chunk_refs *r, const char *keep, const char *store_dir,
		       char *why, size_t why_len)
{
	struct snapfile f;
	struct stat st;
	char kw[WHY_MAX] = "", *layout = NULL;
	int ret;

	if (!store_dir)
		return why_set(why, why_len, -EINVAL, "--keep %s: a VM snapshot needs --store DIR "
			       "(the store that holds its chunks)", keep);
	ret = snapfile_read(keep, &f, kw, sizeof(kw));
	if (ret == -ENOENT && !stat(keep, &st) && S_ISDIR(st.st_mode))
		why_set(kw, sizeof(kw), ret, "a directory, not a VM snapshot (no %s)",
			SNAPFILE_NAME);
	if (!ret)
		ret = snap_ref_layout(store_dir, keep, &f.d, &layout, kw, sizeof(kw));
	if (!ret)
		ret = snap_ref_ram_chunks(&f.d, store_dir, NULL, r, kw, sizeof(kw));
	if (!ret && layout) {
		ret = chunk_refs_add_file(r, layout, kw, sizeof(kw));
		if (ret && !kw[0])
			why_set(kw, sizeof(kw), ret, "%s: %s", layout, strerror(-ret));
	}
	if (ret)
		why_set(why, why_len, ret, "%s: %s; nothing removed", keep,
			kw[0] ? kw : strerror(-ret));
	free(layout);
	snapfile_free(&f);
	return ret;
}

int snap_ref_keep_fetched(struct chunk_refs *r, const struct image_fetched *f,
			  const char *store_dir, char *why, size_t why_len)
{
	char path[PATH_MAX + 80], hex[SHA256_HEX_LEN + 1];
	char kw[WHY_MAX] = "";
	struct snapdoc d;
	int ret;

	ret = snapdoc_parse((const char *)f->snapdoc, f->snapdoc_len, &d, kw, sizeof(kw));
	if (!ret)
		ret = snapfile_write(store_dir, NULL, f->snapdoc, f->snapdoc_len, NULL, kw,
				     sizeof(kw));
	if (!ret)
		ret = snap_ref_ram_chunks(&d, store_dir, f->chunk_url, r, kw, sizeof(kw));
	for (unsigned l = 0; !ret && l < f->d.n_layouts; l++) {
		sha256_to_hex(f->d.layouts[l].digest, hex);
		snprintf(path, sizeof(path), "%s/layouts/%s.layout", store_dir, hex);
		ret = chunk_refs_add_fetched(r, path, kw, sizeof(kw));
	}
	if (ret)
		why_set(why, why_len, ret, "VM snapshot at %s: %s; nothing removed", f->chunk_url,
			kw[0] ? kw : strerror(-ret));
	return ret;
}
