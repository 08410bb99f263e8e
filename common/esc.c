/* SPDX-License-Identifier: MIT */
#include "esc.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/*
 * The length of the valid UTF-8 sequence of a character of two to four bytes at p (end:
 * the end of the text) and its code point, or 0 when the bytes there are not one.
 */
static size_t utf8_seq(const uint8_t *p, const uint8_t *end, uint32_t *cp)
{
	size_t n;
	uint32_t c;

	if ((p[0] & 0xe0) == 0xc0) {
		n = 2;
		c = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3;
		c = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4;
		c = p[0] & 0x07;
	} else {
		return 0;
	}
	if ((size_t)(end - p) < n)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		c = c << 6 | (p[i] & 0x3f);
	}
	if ((n == 2 && c < 0x80) || (n == 3 && c < 0x800) || (n == 4 && c < 0x10000) ||
	    c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return n;
}

/*
 * A character a terminal would obey, that changes how the line reads, or that cannot be seen:
 * C1 controls, U+00AD (soft hyphen), U+061C, U+200B-U+200F (zero-width space, non-joiner,
 * joiner; the marks), U+2028-U+202E, U+2060-U+2069 (word joiner, invisible operators, the
 * isolates), U+FEFF (zero-width no-break space).
 */
static bool cp_hidden(uint32_t c)
{
	return (c >= 0x80 && c <= 0x9f) || c == 0xad || c == 0x61c ||
	       (c >= 0x200b && c <= 0x200f) || (c >= 0x2028 && c <= 0x202e) ||
	       (c >= 0x2060 && c <= 0x2069) || c == 0xfeff;
}

struct esc_out {
	char *p;
	size_t cap;     /* bytes for text: out_len - 1 */
	size_t used;
	size_t fits;    /* used at the last boundary that leaves room for "..." */
	bool cut;
};

/* Append one unit (a character kept or an escape): all of it, or cut the text there. */
static void put(struct esc_out *o, const char *s, size_t n)
{
	if (o->cut)
		return;
	if (n > o->cap - o->used) {
		o->cut = true;
		return;
	}
	memcpy(o->p + o->used, s, n);
	o->used += n;
	if (o->used + 3 <= o->cap)
		o->fits = o->used;
}

static void put_hex(struct esc_out *o, uint8_t b)
{
	static const char hex[] = "0123456789abcdef";
	char e[4] = { '\\', 'x', hex[b >> 4], hex[b & 15] };

	put(o, e, sizeof(e));
}

static const char *esc_any(const void *s, size_t len, char *out, size_t out_len,
			   bool keep_backslash)
{
	const uint8_t *p = s, *end = p + len;
	struct esc_out o = { .p = out };

	if (!out_len)
		return "";
	o.cap = out_len - 1;
	while (p < end && !o.cut) {
		uint32_t cp;
		size_t n;

		if (*p >= 0x20 && *p < 0x7f) {
			if (*p == '\\' && !keep_backslash)
				put(&o, "\\\\", 2);
			else
				put(&o, (const char *)p, 1);
			p++;
			continue;
		}
		n = *p < 0x80 ? 0 : utf8_seq(p, end, &cp);
		if (n && !cp_hidden(cp)) {
			put(&o, (const char *)p, n);
			p += n;
			continue;
		}
		for (size_t i = 0; i < (n ? n : 1); i++)
			put_hex(&o, p[i]);
		p += n ? n : 1;
	}
	if (o.cut) {
		o.used = o.fits;
		memcpy(out + o.used, "...", o.cap - o.used < 3 ? o.cap - o.used : 3);
		o.used += o.cap - o.used < 3 ? o.cap - o.used : 3;
	}
	out[o.used] = '\0';
	return out;
}

const char *esc_bytes(const void *s, size_t len, char *out, size_t out_len)
{
	return esc_any(s, len, out, out_len, false);
}

const char *esc_str(const char *s, char *out, size_t out_len)
{
	return esc_any(s ? s : "", s ? strlen(s) : 0, out, out_len, false);
}

const char *esc_line(const char *s, char *out, size_t out_len)
{
	return esc_any(s ? s : "", s ? strlen(s) : 0, out, out_len, true);
}
