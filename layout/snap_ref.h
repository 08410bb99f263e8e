/* SPDX-License-Identifier: MIT */
/*
 * VM snapshots by reference (docs/images.md, "VM snapshots by tag"): a snapshot of a store
 * (vmsnap/snapfile.h: its document; its chunks: vm.state, the page map's pieces, the RAM
 * chunks the map names; its disk: a layout chain) published under a name as an image is
 * (cas/remote/image_ref.h, with the document as one more file), and fetched back: the
 * document and the disk's layouts, not the RAM (a restore fetches it lazily). Here, above
 * vmsnap/ and cas/remote/, because a snapshot's chunks are found by reading its page map
 * and its disk's layouts.
 *
 * The disk of a local snapshot is its top layout, found by the document's disk.layout
 * digest as STORE/layouts/<hex>.layout, else <hex>.layout beside the snapshot's document
 * (its directory), opened as any layout (its parents by hint or by digest beside it).
 * Nothing here prints; refusals are one line in why.
 */
#ifndef LZ_LAYOUT_SNAP_REF_H
#define LZ_LAYOUT_SNAP_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../cas/remote/image_ref.h"
#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"
#include "../vmsnap/doc.h"
#include "refs.h"

/*
 * The top layout of the local snapshot whose document is at snap (a directory or its
 * document's file): a malloc'd path into *layout, NULL when the snapshot has no disk.
 * -ENOENT with why naming where it looked; -EBADMSG a file there that is not that layout.
 */
int snap_ref_layout(const char *store_dir, const char *snap, const struct snapdoc *d,
		    char **layout, char *why, size_t why_len);

/*
 * The chunks of d's RAM (its vm.state, its page map's pieces and every chunk the map
 * names; ramstore_refs) appended to r->d: the map read through the store (and remote_url,
 * NULL: none; what it fetches is kept in the store). -errno with one line in why naming a
 * missing piece ("the page map's piece 2 sha256:HEX is missing").
 */
int snap_ref_ram_chunks(const struct snapdoc *d, const char *store_dir, const char *remote_url,
			struct chunk_refs *r, char *why, size_t why_len);

/*
 * What a --keep of gc names when it is a snapshot (a directory, or a document's .json
 * file: snapfile_is): its RAM chunks (from store_dir, required), its disk's layouts and
 * their chunks. 0, or -errno with one line in why ("...; nothing removed").
 */
int snap_ref_keep_file(struct chunk_refs *r, const char *keep, const char *store_dir,
		       char *why, size_t why_len);
/*
 * The same for a snapshot fetched by reference (f from image_fetch_as): its document into
 * store_dir/snapshots/, its RAM chunks through store_dir and the reference's remote, the
 * chunks of its fetched layouts (store_dir/layouts/).
 */
int snap_ref_keep_fetched(struct chunk_refs *r, const struct image_fetched *f,
			  const char *store_dir, char *why, size_t why_len);

/* ---- publishing: lazyblk push --remote REF SNAPSHOT ---- */

struct snap_push_opts {
	struct cas_push_opts push;    /* store, remote (the reference), progress, cancel, notes */
	const char *snapshot;         /* a snapshot directory or its snapshot.json */
	const char *created;          /* RFC 3339, for image.json */
};

struct snap_push_stats {
	struct image_push_stats img;  /* chunks, files and the name's digest */
	uint8_t id[SHA256_LEN];       /* the snapshot document's sha256 */
	uint8_t layout[SHA256_LEN];   /* the disk's top layout digest (has_disk) */
	bool has_disk;
	unsigned layers;              /* layout files of the disk's chain */
	uint64_t ram_chunks;          /* chunks of the RAM: state, map pieces, pages */
	uint64_t disk_chunks;         /* chunks of the disk's chain */
};

/*
 * Publish the snapshot under the reference o->push.remote.url (oci://HOST/REPO:TAG or
 * http(s)://HOST/PATH/images/NAME): every chunk it uses (each must be in the store: the
 * first one missing is named, and nothing is uploaded), the layout files of its disk's chain
 * and their manifest (<top>.manifest beside the top layout, when it is the one the layout
 * was made from), then its document and the name (image_push). 0, or -errno with one line
 * in why. Prints nothing.
 */
int snap_push(const struct snap_push_opts *o, struct snap_push_stats *st, char *why,
	      size_t why_len);

/* ---- fetching: lazyblk run --restore REF ---- */

struct snap_fetched {
	struct snapdoc d;             /* the document, parsed */
	uint8_t id[SHA256_LEN];       /* its sha256 */
	char *doc;                    /* STORE/snapshots/<id hex>.json */
	char *layout;                 /* STORE/layouts/<top hex>.layout; NULL: no disk */
	char *manifest;               /* STORE/layouts/<top hex>.manifest, or NULL */
	char *chunk_url;              /* the remote of its chunks (RAM and disk) */
	unsigned fetched;             /* files downloaded (the others were there already) */
	uint64_t fetched_bytes;
};

/*
 * Fetch the VM snapshot o->url names into store_dir (the cache): its document, checked
 * against the digest the name's documents give and parsed, into STORE/snapshots/<hex>.json,
 * and its disk's layout files (and manifest) into STORE/layouts/ as image_fetch does. The
 * RAM is not fetched; but the remote must answer for its vm.state and page map chunks (a
 * missing one is named). A disk image under the name is refused with one line ("REF is a
 * disk image, not a VM snapshot: serve it with lazyblk serve REF"). 0, or -errno with one
 * line in why. Prints nothing.
 */
int snap_fetch(const struct remote_opts *o, const char *store_dir, struct snap_fetched *out,
	       char *why, size_t why_len);
void snap_fetched_free(struct snap_fetched *f);

#endif
