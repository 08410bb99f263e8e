/* SPDX-License-Identifier: MIT */
/*
 * Garbage collection of an HTTP store that knows images (lazyblk cas gc --remote
 * http(s)://HOST/PATH/, docs/images.md): what stays is what the store's images and the
 * --keep files reference, found by reading their layouts (refs.h), so it lives above cas/;
 * the sweep itself and the leases are cas/remote's (image_sweep_http, lease.h).
 */
#ifndef LZ_LAYOUT_GC_HTTP_H
#define LZ_LAYOUT_GC_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cas/remote/image_ref.h"
#include "../common/why.h"
#include "refs.h"

/*
 * Add what one --keep names: an image file (a layout or a manifest, refs.h), or an image by
 * reference (image_ref_is), fetched into store_dir/layouts/ (NULL: refused), every layer's
 * chunks. 0, or -errno with one line in why ("...; nothing removed").
 */
int chunk_refs_add_keep(struct chunk_refs *r, const char *keep, const char *store_dir,
			char *why, size_t why_len);

struct gc_http_opts {
	const char *url;                  /* http(s)://HOST/PATH/, with the slash */
	const char *const *keep;          /* --keep: image files or references */
	size_t n_keep;
	const char *store_dir;            /* layouts fetched into DIR/layouts/; NULL: a
					     private temporary directory, removed after */
	uint64_t grace_secs;              /* files uploaded since stay (image_sweep_http) */
	bool dry_run;                     /* nothing deleted, no lease taken */
	/* each file deleted (dry run: that would be), as image_sweep_opts.deleted */
	void (*deleted)(void *arg, const char *rel, uint64_t size);
	void *arg;
	struct note_sink notes;           /* NOTE_WARN: expired leases not removed */
};

struct gc_http_result {
	struct image_sweep_result sweep;
	size_t images;                    /* images of images/index.json */
};

/*
 * Under the gc's lease (lease.h; taken first, refused while a push holds one, checked
 * again after the images are read): every image of the store fetched, the chunks of its
 * layouts and its files (layouts, manifest) kept with the --keep files' chunks, the rest
 * swept (image_sweep_http); then the expired leases of crashed pushes and gcs removed.
 * A store with no image and no --keep is refused (nothing would stay). 0, or -errno with
 * one line in why; nothing is deleted on any failure before the sweep.
 */
int gc_http(const struct gc_http_opts *o, struct gc_http_result *res, char *why,
	    size_t why_len);

#endif
