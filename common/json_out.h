/* SPDX-License-Identifier: MIT */
/* Writing JSON text with byte-exact strings: valid UTF-8 as a JSON string, else hex. */
#ifndef LZ_COMMON_JSON_OUT_H
#define LZ_COMMON_JSON_OUT_H

#include <stdbool.h>
#include <stddef.h>
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

#endif
