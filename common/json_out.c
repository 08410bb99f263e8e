/* SPDX-License-Identifier: MIT */
#include "json_out.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"

static const char hex_digits[] = "0123456789abcdef";

bool json_utf8_valid(const char *s, size_t len)
{
	const uint8_t *p = (const uint8_t *)s, *end = p + len;

	while (p < end) {
		uint8_t c = *p;
		size_t n;
		uint32_t cp;

		if (c == 0)
			return false;
		if (c < 0x80) {
			p++;
			continue;
		}
		if ((c & 0xe0) == 0xc0) {
			n = 1;
			cp = c & 0x1f;
		} else if ((c & 0xf0) == 0xe0) {
			n = 2;
			cp = c & 0x0f;
		} else if ((c & 0xf8) == 0xf0) {
			n = 3;
			cp = c & 0x07;
		} else {
			return false;
		}
		if ((size_t)(end - p) <= n)
			return false;
		for (size_t i = 1; i <= n; i++) {
			if ((p[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (p[i] & 0x3f);
		}
		if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) ||
		    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		p += n + 1;
	}
	return true;
}

/* The JSON text of byte c inside a string (at most 6 bytes, NUL-terminated in out). */
static size_t json_escape_char(unsigned char c, char out[7])
{
	switch (c) {
	case '"': memcpy(out, "\\\"", 3); return 2;
	case '\\': memcpy(out, "\\\\", 3); return 2;
	case '\n': memcpy(out, "\\n", 3); return 2;
	case '\t': memcpy(out, "\\t", 3); return 2;
	case '\r': memcpy(out, "\\r", 3); return 2;
	default:
		if (c < 0x20 || c == 0x7f) {
			memcpy(out, "\\u00", 4);
			out[4] = hex_digits[c >> 4];
			out[5] = hex_digits[c & 15];
			out[6] = '\0';
			return 6;
		}
		out[0] = (char)c;
		out[1] = '\0';
		return 1;
	}
}

void json_write_str(FILE *f, const char *s, size_t len)
{
	char e[7];

	fputc('"', f);
	for (size_t i = 0; i < len; i++)
		fputs(json_escape_char((unsigned char)s[i], e) ? e : "", f);
	fputc('"', f);
}

void json_write_field_bytes(FILE *f, const char *key, const void *v, size_t len)
{
	const uint8_t *p = v;

	fputc('"', f);
	fputs(key, f);
	if (json_utf8_valid(v, len)) {
		fputs("\":", f);
		json_write_str(f, v, len);
		return;
	}
	fputs("_hex\":\"", f);
	for (size_t i = 0; i < len; i++) {
		fputc(hex_digits[p[i] >> 4], f);
		fputc(hex_digits[p[i] & 15], f);
	}
	fputc('"', f);
}

/* ------------------------------------------------------------ documents in memory */

void json_buf_reserve(struct json_buf *b, size_t more)
{
	if (b->err || b->cap - b->len > more)
		return;
	if (more >= SIZE_MAX - b->len ||
	    !grow_from((void **)&b->p, &b->cap, b->len + more + 1, 1, 256))
		b->err = -ENOMEM;
}

void json_buf_put(struct json_buf *b, const char *s, size_t n)
{
	json_buf_reserve(b, n);
	if (b->err)
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void json_buf_puts(struct json_buf *b, const char *s)
{
	json_buf_put(b, s, strlen(s));
}

void json_buf_u64(struct json_buf *b, uint64_t v)
{
	char buf[24];
	size_t i = sizeof(buf);

	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	json_buf_put(b, buf + i, sizeof(buf) - i);
}

void json_buf_printf(struct json_buf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (b->err)
		return;
	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0) {
		b->err = -EINVAL;
		return;
	}
	json_buf_reserve(b, (size_t)n);
	if (b->err)
		return;
	va_start(ap, fmt);
	vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->len += (size_t)n;
}

char *json_buf_take(struct json_buf *b, size_t *len)
{
	char *p = b->p;

	if (len)
		*len = b->len;
	b->p = NULL;
	b->len = b->cap = 0;
	return p;
}

void json_buf_free(struct json_buf *b)
{
	free(b->p);
	*b = (struct json_buf){ 0 };
}

static void json_key(struct json_buf *b, const char *key)
{
	if (b->len && b->p[b->len - 1] != '{' && b->p[b->len - 1] != '[')
		json_buf_put(b, ",", 1);
	json_buf_put(b, "\"", 1);
	json_buf_puts(b, key);
	json_buf_put(b, "\":", 2);
}

void json_field_u64(struct json_buf *b, const char *key, uint64_t v)
{
	json_key(b, key);
	json_buf_u64(b, v);
}

void json_field_bool(struct json_buf *b, const char *key, bool v)
{
	json_key(b, key);
	json_buf_puts(b, v ? "true" : "false");
}

void json_field_fixed(struct json_buf *b, const char *key, double v, int decimals)
{
	json_key(b, key);
	json_buf_printf(b, "%.*f", decimals, v);
}

void json_field_bytes(struct json_buf *b, const char *key, const void *v, size_t len)
{
	const uint8_t *p = v;
	char e[7], hkey[64];

	if (json_utf8_valid(v, len)) {
		json_key(b, key);
		json_buf_put(b, "\"", 1);
		for (size_t i = 0; i < len; i++)
			json_buf_put(b, e, json_escape_char(p[i], e));
		json_buf_put(b, "\"", 1);
		return;
	}
	snprintf(hkey, sizeof(hkey), "%s_hex", key);
	json_key(b, hkey);
	json_buf_put(b, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		e[0] = hex_digits[p[i] >> 4];
		e[1] = hex_digits[p[i] & 15];
		json_buf_put(b, e, 2);
	}
	json_buf_put(b, "\"", 1);
}

void json_field_str(struct json_buf *b, const char *key, const char *v)
{
	json_key(b, key);
	json_buf_put(b, "\"", 1);
	json_buf_puts(b, v);
	json_buf_put(b, "\"", 1);
}
