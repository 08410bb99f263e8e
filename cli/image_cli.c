/* SPDX-License-Identifier: MIT */
/*
 * Images by reference on the command line: serve, run, export and warm take
 * oci://HOST/REPO:TAG or http(s)://HOST/PATH/images/NAME in place of IMAGE.layout
 * (cli_image_resolve); push takes the files of a layout's chain from image_layout_files.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/remote/image_ref.h"
#include "../common/fsutil.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/gc_http.h"
#include "../layout/layout.h"
#include "../layout/refs.h"
#include "cli.h"

int image_layout_files(const struct layout *l, const char *path, const char ***paths,
		       const uint8_t (**digests)[SHA256_LEN], unsigned *n)
{
	/* the files of the chain, top first: one allocation, *paths, for both arrays */
	unsigned k = l->n_layers ? l->n_layers : 1;
	uint8_t (*d)[SHA256_LEN];
	const char **p;

	p = malloc(k * (sizeof(*p) + SHA256_LEN));
	if (!p)
		return -ENOMEM;
	d = (uint8_t (*)[SHA256_LEN])(p + k);
	for (unsigned i = 0; i < k; i++) {
		p[i] = l->n_layers ? l->layers[i].path : path;
		memcpy(d[i], l->n_layers ? l->layers[i].digest : l->digest, SHA256_LEN);
	}
	p[0] = path;
	*paths = p;
	*digests = (const uint8_t (*)[SHA256_LEN])d;
	*n = k;
	return 0;
}

int cli_image_resolve(const char *arg, const char *store_dir, struct cli_remote *rem,
		      struct cli_image *img, const char **layout)
{
	struct remote_opts ro = { 0 };
	struct image_fetched *f;
	char why[PATH_MAX + 256], h[32];
	int ret;

	memset(img, 0, sizeof(*img));
	*layout = arg;
	if (!image_ref_is(arg))
		return 0;
	if (!store_dir) {
		log_error("%s: an image by reference needs --store DIR (its layouts are fetched "
			  "into DIR/layouts/)", arg);
		return 1;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		log_error("out of memory");
		return 1;
	}
	ro.url = arg;
	ro.concurrency = rem->concurrency;
	ro.timeout_ms = rem->timeout_ms;
	ro.retries = rem->retries;
	ret = image_fetch(&ro, store_dir, f, why, sizeof(why));
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		free(f);
		return 1;
	}
	if (f->fetched)
		log_info("%s: fetched %u file%s (%s) into %s/layouts", arg, f->fetched,
			 f->fetched == 1 ? "" : "s", size_human(f->fetched_bytes, h, sizeof(h)),
			 store_dir);
	img->f = f;
	if (!rem->url)
		rem->url = f->chunk_url;
	*layout = f->layout;
	return 0;
}

void cli_image_free(struct cli_image *img)
{
	if (img->f)
		image_fetched_free(img->f);
	free(img->f);
	img->f = NULL;
}

int cli_keep_add(struct chunk_refs *refs, const char *keep, const char *store_dir)
{
	char why[PATH_MAX + 512];

	return cli_fail(chunk_refs_add_keep(refs, keep, store_dir, why, sizeof(why)) ? 1 : 0, why);
}
