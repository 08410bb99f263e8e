/* SPDX-License-Identifier: MIT */
/* lazyblk run --restore REF: a VM snapshot's document and disk fetched by name (snap_ref.h). */
#include "snap_ref.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../vmsnap/snapfile.h"

/* The document and what the name's documents say of it agree: its disk is their layouts. */
static int doc_matches(const struct image_fetched *f, const struct snapdoc *d, const char *url,
		       char *why, size_t why_len)
{
	if (d->has_disk != (f->d.n_layouts > 0) ||
	    (d->has_disk && memcmp(d->layout, f->d.layouts[0].digest, SHA256_LEN)))
		return why_set(why, why_len, -EBADMSG, "%s: the snapshot document's disk is not the "
			       "layout chain published with it: refused", url);
	return 0;
}

/*
 * The remote answers for the chunks a restore needs first (its vm.state and page map): a
 * missing one is named.
 */
static int pieces_on_remote(const struct remote_opts *o, const char *chunk_url,
			    const struct snapdoc *d, char *why, size_t why_len)
{
	struct remote_opts ro = *o;
	struct remote *r = NULL;
	char hex[SHA256_HEX_LEN + 1], w[WHY_MAX] = "";
	int ret;

	ro.url = chunk_url;
	ro.push = false;
	ret = remote_open(&ro, &r, w, sizeof(w));
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", o->url, w[0] ? w : strerror(-ret));
	for (unsigned i = 0; !ret && i <= d->nmap; i++) {
		const uint8_t *c = i ? d->map[i - 1].digest : d->state.digest;

		ret = remote_probe(r, c, w, sizeof(w));
		sha256_to_hex(c, hex);
		if (ret == -ENOENT && i)
			why_set(why, why_len, ret, "%s: the snapshot's page map piece %u (chunk "
				"sha256:%s) is missing on the remote", o->url, i - 1, hex);
		else if (ret == -ENOENT)
			why_set(why, why_len, ret, "%s: the snapshot's vm.state chunk sha256:%s is "
				"missing on the remote", o->url, hex);
		else if (ret)
			why_set(why, why_len, ret, "%s: %s", o->url, w[0] ? w : strerror(-ret));
	}
	remote_close(r);
	return ret;
}

int snap_fetch(const struct remote_opts *o, const char *store_dir, struct snap_fetched *out,
	       char *why, size_t why_len)
{
	struct image_fetched f;
	char path[PATH_MAX], hex[SHA256_HEX_LEN + 1], w[WHY_MAX] = "";
	int ret;

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = '\0';
	ret = image_fetch_as(o, store_dir, IMAGE_WANT_SNAPSHOT, &f, why, why_len);
	if (ret)
		return ret;
	ret = snapdoc_parse((const char *)f.snapdoc, f.snapdoc_len, &out->d, w, sizeof(w));
	if (ret)
		why_set(why, why_len, ret, "%s: %s", o->url, w[0] ? w : strerror(-ret));
	if (!ret)
		ret = doc_matches(&f, &out->d, o->url, why, why_len);
	if (!ret)
		ret = snapfile_write(store_dir, NULL, f.snapdoc, f.snapdoc_len, out->id, why,
				     why_len);
	if (!ret)
		ret = pieces_on_remote(o, f.chunk_url, &out->d, why, why_len);
	if (ret)
		goto out;
	sha256_to_hex(out->id, hex);
	snprintf(path, sizeof(path), "%s/" SNAPFILE_DIR "/%s.json", store_dir, hex);
	out->doc = strdup(path);
	out->chunk_url = f.chunk_url;
	out->layout = f.layout;
	out->manifest = f.manifest;
	f.chunk_url = f.layout = f.manifest = NULL;
	out->fetched = f.fetched;
	out->fetched_bytes = f.fetched_bytes;
	if (!out->doc) {
		ret = why_set(why, why_len, -ENOMEM, "out of memory");
		snap_fetched_free(out);
	}
out:
	image_fetched_free(&f);
	return ret;
}

void snap_fetched_free(struct snap_fetched *f)
{
	free(f->doc);
	free(f->layout);
	free(f->manifest);
	free(f->chunk_url);
	memset(f, 0, sizeof(*f));
}
