/* SPDX-License-Identifier: MIT */
/* Parsing and printing byte sizes: "4096", "64K", "1M", "2G", "1T" (binary units). */
#ifndef LZ_COMMON_SIZE_H
#define LZ_COMMON_SIZE_H

#include <stddef.h>
#include <stdint.h>

/* Returns 0 or -EINVAL (garbage, negative, overflow). */
int size_parse(const char *s, uint64_t *out);
/* "1.5 MiB"-style human text into buf. */
const char *size_human(uint64_t bytes, char *buf, size_t len);

#endif
