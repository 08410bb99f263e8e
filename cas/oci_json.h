/* SPDX-License-Identifier: MIT */
/*
 * What reading OCI documents needs wherever they come from (an OCI layout or a
 * docker-archive being imported, cas/import/; a registry's chunk index, cas/remote/):
 * digests, strict JSON, and strings fit for a message.
 */
#ifndef LZ_CAS_OCI_JSON_H
#define LZ_CAS_OCI_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "../common/sha256.h"

/*
 * "sha256:" followed by exactly 64 lowercase hex digits, nothing else. Anything else
 * (other algorithms, upper case, "sha256:../../x") is -EINVAL, so a digest can always be
 * used as a file name.
 */
int oci_digest_parse(const char *s, uint8_t d[SHA256_LEN]);

/* The whole of buf must be one JSON value (trailing white space allowed). */
struct json_object *oci_json_parse(const char *buf, size_t len, const char **why);
/* Member key of object o if it has that type, else NULL (also for o == NULL). */
struct json_object *oci_json_get(struct json_object *o, const char *key, enum json_type type);
const char *oci_json_str(struct json_object *o, const char *key);

/* A copy of s fit for one line of a message: control bytes become '?', long text is cut. */
const char *oci_printable(const char *s, char *buf, size_t len);

#endif
