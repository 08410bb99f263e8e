/* SPDX-License-Identifier: MIT */
/* Parsing and printing byte sizes: "4096", "64K", "1M", "2G", "1T" (binary units). */
#ifndef LZ_COMMON_SIZE_H
#define LZ_COMMON_SIZE_H

#include <stddef.h>
#include <stdint.h>

/*
 * A size: decimal digits, then nothing (bytes) or K, M, G or T (any case: powers of 1024),
 * optionally spelt KiB/Ki, MiB/Mi, ... Refused: "2GB" (B without the i: a power of 1000 to
 * many tools), fractions ("1.5G"), hex, signs, spaces. Returns 0 or -EINVAL (garbage,
 * negative, overflow). size_parse_unit: a number without a suffix counts units of unit
 * bytes (--mem: MiB).
 */
int size_parse(const char *s, uint64_t *out);
int size_parse_unit(const char *s, uint64_t unit, uint64_t *out);
/* "1.5 MiB"-style human text into buf. */
const char *size_human(uint64_t bytes, char *buf, size_t len);

#endif
