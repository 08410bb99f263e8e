/* SPDX-License-Identifier: MIT */
/*
 * Writing JSON text: byte-exact strings (valid UTF-8 as a JSON string, else hex) to a stream
 * the caller gives, and documents built in memory (struct json_buf: the OCI chunk index, the
 * statistics of serve, export, warm and the control socket). Nothing here names stdout or
 * stderr: the caller says where the text goes.
 */
#ifndef LZ_COMMON_JSON_OUT_H
#define LZ_COMMON_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "test_hook.h"

TEST_HOOK
bool json_utf8_valid(const char *s, size_t len);
/* Writes "s" escaped (caller checked json_utf8_valid, NUL-free). */
void json_write_str(FILE *f, const char *s, size_t len);
/*
 * Writes "key":"value" when value is valid UTF-8 without NUL, otherwise
 * "key_hex":"<hex of the bytes>", so any byte string round-trips.
 */
void json_write_field_bytes(FILE *f, const char *key, const void *v, size_t len);

/*
 * A growing NUL-terminated text buffer (JSON, and the text lines of the same statistics).
 * Start from { 0 }; the first failure sticks in err (-ENOMEM) and later writes do nothing,
 * so a caller checks once at the end. p stays NULL until something is written.
 */
struct json_buf {
	char *p;
	size_t len, cap;
	int err;
};

void json_buf_reserve(struct json_buf *b, size_t more);
void json_buf_put(struct json_buf *b, const char *s, size_t n);
void json_buf_puts(struct json_buf *b, const char *s);
void json_buf_u64(struct json_buf *b, uint64_t v);
void json_buf_printf(struct json_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* The bytes (NUL-terminated) handed to the caller (free()); b is empty again. */
char *json_buf_take(struct json_buf *b, size_t *len);
void json_buf_free(struct json_buf *b);

/*
 * Object members: "key":value, with a comma unless it follows '{' or '['. Open and close
 * the object with json_buf_puts(b, "{") and "}".
 */
void json_field_u64(struct json_buf *b, const char *key, uint64_t v);
void json_field_bool(struct json_buf *b, const char *key, bool v);
/* A number with a fixed count of decimals ("%.*f"). */
void json_field_fixed(struct json_buf *b, const char *key, double v, int decimals);
/* A byte string member (a path): as json_write_field_bytes ("key_hex" unless UTF-8). */
void json_field_bytes(struct json_buf *b, const char *key, const void *v, size_t len);
/* A string member; the caller checked it needs no escaping (names, hex digests). */
void json_field_str(struct json_buf *b, const char *key, const char *v);

#endif
