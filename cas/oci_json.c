/* SPDX-License-Identifier: MIT */
/* cas/oci_json: OCI digests and strict JSON, for the importers and the remote's chunk index. */
#include "oci_json.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

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

struct json_object *oci_json_parse(const char *buf, size_t len, const char **why)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error err;
	size_t end;

	if (len > INT32_MAX) {
		*why = "too large";
		return NULL;
	}
	tok = json_tokener_new();
	if (!tok) {
		*why = "out of memory";
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, buf, (int)len);
	err = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (!obj) {
		*why = err == json_tokener_continue ? "not JSON (empty or truncated)" : "not JSON";
		return NULL;
	}
	for (; end < len; end++) {
		if (!strchr(" \t\r\n", buf[end]) || !buf[end]) {
			json_object_put(obj);
			*why = "not JSON (garbage after the value)";
			return NULL;
		}
	}
	return obj;
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
	return json_object_get_string(oci_json_get(o, key, json_type_string));
}

const char *oci_printable(const char *s, char *buf, size_t len)
{
	size_t i = 0;

	if (!len)
		return "";
	for (; s && s[i] && i + 1 < len; i++) {
		unsigned char c = (unsigned char)s[i];

		buf[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	buf[i] = '\0';
	if (s && s[i] && len > 4)
		memcpy(buf + len - 4, "...", 4);
	return buf;
}
