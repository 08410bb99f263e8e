/* SPDX-License-Identifier: MIT */
/*
 * What reading OCI documents needs wherever they come from (an OCI layout or a
 * docker-archive being imported, cas/import/; a registry's chunk index, cas/remote/):
 * digests, tags, strict JSON. (Strings fit for a message: common/esc.h.)
 */
#ifndef LZ_CAS_OCI_JSON_H
#define LZ_CAS_OCI_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "../common/sha256.h"
#include "../common/why.h"

/*
 * "sha256:" followed by exactly 64 lowercase hex digits, nothing else. Anything else
 * (other algorithms, upper case, "sha256:../../x") is -EINVAL, so a digest can always be
 * used as a file name.
 */
int oci_digest_parse(const char *s, uint8_t d[SHA256_LEN]);
/*
 * A tag by the distribution spec's rule: [a-zA-Z0-9_][a-zA-Z0-9._-]{0,127} (ASCII only). A
 * tag that is not is never put in a URL or a message: a registry's tag list may hold anything.
 */
bool oci_tag_valid(const char *s);

/*
 * The kinds of JSON document lazyblk reads from outside, each with its limits. json-c spends
 * up to ~800 bytes on a value as small as {} (a 2 MB [{},{},...] took 548 MB), so the values
 * are counted before parsing (every '{', '[' and ',' outside strings): memory stays under
 * about OCI_JSON_VALUES_MAX x 1 KiB (64 MiB) plus a few times the document's size.
 */
enum oci_json_kind {
	OCI_JSON_INDEX,     /* an OCI image index: index.json, a registry's chunk index */
	OCI_JSON_MANIFEST,  /* an OCI image manifest, a manifest of a registry's chunk index */
	OCI_JSON_CONFIG,    /* an image config (OCI or docker) */
	OCI_JSON_DOCKER,    /* a docker-archive's manifest.json */
	OCI_JSON_TOKEN,     /* a registry token endpoint's answer */
};

#define OCI_JSON_INDEX_MAX (4u << 20)     /* bytes; containerd caps manifests at 4 MiB too */
#define OCI_JSON_MANIFEST_MAX (4u << 20)
#define OCI_JSON_CONFIG_MAX (8u << 20)
#define OCI_JSON_DOCKER_MAX (4u << 20)
#define OCI_JSON_TOKEN_MAX (1u << 20)
#define OCI_JSON_VALUES_MAX 65536         /* values of a document (a token answer: 4096) */
#define OCI_JSON_TOKEN_VALUES_MAX 4096
#define OCI_JSON_DEPTH_MAX 16             /* nesting of arrays and objects (a config: 32) */
#define OCI_JSON_CONFIG_DEPTH_MAX 32

struct oci_json_limits {
	size_t max_bytes, max_values;
	int max_depth;
	const char *name;                 /* "an OCI image manifest" */
	const char *too_big;              /* the reasons, each naming its limit */
	const char *too_many;
	const char *too_deep;
};

const struct oci_json_limits *oci_json_limits(enum oci_json_kind kind);
/*
 * The whole of buf must be one JSON value (trailing white space allowed) within the limits
 * of kind: 0 and the value in *out. Else *out NULL and -EFBIG (over one of kind's limits: why
 * names it), -EBADMSG (not JSON: why says how), -ENOMEM.
 */
int oci_json_parse(const char *buf, size_t len, enum oci_json_kind kind,
		   struct json_object **out, char *why, size_t why_len);
/* Member key of object o if it has that type, else NULL (also for o == NULL). */
struct json_object *oci_json_get(struct json_object *o, const char *key, enum json_type type);
/* Member key of object o if it is a string without a NUL inside ("\u0000"), else NULL. */
const char *oci_json_str(struct json_object *o, const char *key);
/* Member key of object o if it is an integer from 0 to INT64_MAX - 1: 0, else -EBADMSG. */
int oci_json_u64(struct json_object *o, const char *key, uint64_t *v);

#endif
