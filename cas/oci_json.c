/* SPDX-License-Identifier: MIT */
/* cas/oci_json: OCI digests and strict JSON, for the importers and the remote's chunk index. */
#include "oci_json.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "../common/why.h"

int oci_digest_parse(const char *s, uint8_t d[SHA256_LEN])
{
	static const char prefix[] = "sha256:";
	const char *hex;

	if (!s || strncmp(s, prefix, sizeof(prefix) - 1))
		return -EINVAL;
	hex = s + sizeof(prefix) - 1;
	for (size_t i = 0; i < SHA256_HEX_LEN; i++) {
		char c = hex[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return -EINVAL; /* also stops at the NUL of a short digest */
	}
	if (hex[SHA256_HEX_LEN] != '\0')
		return -EINVAL;
	return sha256_from_hex(hex, d);
}

static bool tag_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '_' || (!first && (c == '.' || c == '-'));
}

bool oci_tag_valid(const char *s)
{
	size_t n = 0;

	if (!s)
		return false;
	for (; s[n]; n++)
		if (n >= 128 || !tag_char(s[n], !n))
			return false;
	return n > 0;
}

#define STR_(x) #x
#define STR(x) STR_(x)
#define LIMITS(bytes, mib, values, depth, what)                                            \
	{ bytes, values, depth, what, "larger than " mib " MiB, the limit for " what,         \
	  "more than " STR(values) " JSON values, the limit for " what,                       \
	  "JSON nested deeper than " STR(depth) ", the limit for " what }

static const struct oci_json_limits limits[] = {
	[OCI_JSON_INDEX] = LIMITS(OCI_JSON_INDEX_MAX, "4", OCI_JSON_VALUES_MAX, OCI_JSON_DEPTH_MAX,
				  "an OCI image index"),
	[OCI_JSON_MANIFEST] = LIMITS(OCI_JSON_MANIFEST_MAX, "4", OCI_JSON_VALUES_MAX,
				     OCI_JSON_DEPTH_MAX, "an OCI image manifest"),
	[OCI_JSON_CONFIG] = LIMITS(OCI_JSON_CONFIG_MAX, "8", OCI_JSON_VALUES_MAX,
				   OCI_JSON_CONFIG_DEPTH_MAX, "an image config"),
	[OCI_JSON_DOCKER] = LIMITS(OCI_JSON_DOCKER_MAX, "4", OCI_JSON_VALUES_MAX,
				   OCI_JSON_DEPTH_MAX, "a docker-archive manifest.json"),
	[OCI_JSON_TOKEN] = LIMITS(OCI_JSON_TOKEN_MAX, "1", OCI_JSON_TOKEN_VALUES_MAX,
				  OCI_JSON_DEPTH_MAX, "a registry token answer"),
};

_Static_assert(OCI_JSON_INDEX_MAX == 4u << 20 && OCI_JSON_MANIFEST_MAX == 4u << 20 &&
		       OCI_JSON_CONFIG_MAX == 8u << 20 && OCI_JSON_DOCKER_MAX == 4u << 20 &&
		       OCI_JSON_TOKEN_MAX == 1u << 20,
	       "the MiB in the messages of limits[]");

const struct oci_json_limits *oci_json_limits(enum oci_json_kind kind)
{
	return &limits[kind];
}

/* Whether buf holds more than max values: '{', '[' and ',' outside strings. */
static bool json_too_many(const char *buf, size_t len, size_t max)
{
	bool in_str = false;
	size_t n = 1;

	for (size_t i = 0; i < len; i++) {
		char c = buf[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = false;
		} else if (c == '"') {
			in_str = true;
		} else if (c == '{' || c == '[' || c == ',') {
			if (++n > max)
				return true;
		}
	}
	return false;
}

int oci_json_parse(const char *buf, size_t len, enum oci_json_kind kind,
		   struct json_object **out, char *why, size_t why_len)
{
	const struct oci_json_limits *lim = &limits[kind];
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error err;
	size_t end;

	*out = NULL;
	if (len > lim->max_bytes)
		return why_set(why, why_len, -EFBIG, "%s", lim->too_big);
	if (json_too_many(buf, len, lim->max_values))
		return why_set(why, why_len, -EFBIG, "%s", lim->too_many);
	tok = json_tokener_new_ex(lim->max_depth);
	if (!tok)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	err = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!obj && err == json_tokener_error_depth)
		return why_set(why, why_len, -EFBIG, "%s", lim->too_deep);
	if (!obj)
		return why_set(why, why_len, -EBADMSG, "%s",
			       err == json_tokener_continue ? "not JSON (empty or truncated)"
							    : "not JSON");
	for (; end < len; end++) {
		if (!strchr(" \t\r\n", buf[end]) || !buf[end]) {
			json_object_put(obj);
			return why_set(why, why_len, -EBADMSG,
				       "not JSON (garbage after the value)");
		}
	}
	*out = obj;
	return 0;
}

struct json_object *oci_json_get(struct json_object *o, const char *key, enum json_type type)
{
	struct json_object *v;

	if (!o || !json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, type))
		return NULL;
	return v;
}

const char *oci_json_str(struct json_object *o, const char *key)
{
	struct json_object *v = oci_json_get(o, key, json_type_string);
	const char *s = json_object_get_string(v);

	/* "\u0000" inside: the C string would be a prefix of the value ("HEX64\u0000junk") */
	if (s && strlen(s) != (size_t)json_object_get_string_len(v))
		return NULL;
	return s;
}

int oci_json_u64(struct json_object *o, const char *key, uint64_t *v)
{
	struct json_object *x = oci_json_get(o, key, json_type_int);
	int64_t i;

	if (!x)
		return -EBADMSG;
	i = json_object_get_int64(x);
	if (i < 0 || i == INT64_MAX)   /* json-c clamps what it cannot hold to INT64_MAX */
		return -EBADMSG;
	*v = (uint64_t)i;
	return 0;
}
