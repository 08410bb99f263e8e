/* SPDX-License-Identifier: MIT */
/*
 * An OCI image layout that is not a directory: its files (oci-layout, index.json,
 * blobs/sha256/<hex>) as open descriptors, for images that arrive some other way (a
 * registry, docker://; a tar of a layout, oci-archive:) and are then imported by the oci:
 * path (import_oci_files). Blobs are staged in the store's tmp/ under staging names (a
 * killed import leaves them to the store's sweep) and removed by oci_files_free; small
 * files live in memory (memfd).
 *
 * Also the platform an image index is resolved to (--platform os/arch[/variant]).
 */
#ifndef LZ_CAS_OCI_FILES_H
#define LZ_CAS_OCI_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "../../common/sha256.h"
#include "../store.h"
#include "import.h"

struct oci_file {
	char *name;       /* "oci-layout", "index.json", "blobs/sha256/<hex>" */
	int fd;
	char *tmp;        /* its staging name in STORE/tmp, or NULL (memfd) */
};

struct oci_files {
	struct oci_file *v;
	size_t n, cap;
	struct store *store;
};

/* A copy (dup) of the descriptor of name: read it with pread. -ENOENT if absent. */
int oci_files_open(const struct oci_files *f, const char *name);
bool oci_files_has(const struct oci_files *f, const char *name);
/* Name holds len bytes of data, in memory. 0 or -errno. */
int oci_files_add_mem(struct oci_files *f, const char *name, const void *data, size_t len);
/*
 * A new empty file for blob d in STORE/tmp (a staging name), as blobs/sha256/<hex>: its
 * descriptor in *fd (owned by f). 0 or -errno.
 */
int oci_files_add_blob(struct oci_files *f, const uint8_t d[SHA256_LEN], int *fd);
/* Close every file, remove the staged ones. */
void oci_files_free(struct oci_files *f);

/* Import the layout in f as oci:DIR[:TAG] would (tag NULL: the only image). */
int import_oci_files(struct import_ctx *ic, const struct oci_files *f, const char *tag);

struct oci_platform {
	char os[32], arch[32], variant[32]; /* variant "" if none */
	bool given;                          /* asked for (not the host's default) */
};

/*
 * "os/arch[/variant]" into p; NULL: this host's (linux and its architecture in the OCI
 * spelling: amd64, arm64, …). -EINVAL if s is not of that form.
 */
int oci_platform_parse(const char *s, struct oci_platform *p);
/* "linux/arm64/v8" */
const char *oci_platform_str(const struct oci_platform *p, char *buf, size_t len);
/*
 * From an index's manifests: the one for p (an entry without a variant matches any wanted
 * variant, and a wanted platform without one any entry's), the only entry when p was not
 * given, else NULL.
 */
struct json_object *oci_platform_pick(struct json_object *manifests,
				      const struct oci_platform *p);
/* "linux/amd64, linux/arm64/v8" (the platforms an index lists) for messages. */
const char *oci_platform_list(struct json_object *manifests, char *buf, size_t len);

#endif
