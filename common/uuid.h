/* SPDX-License-Identifier: MIT */
/*
 * UUIDs as text: "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (RFC 9562's form, hex digits of
 * either case), or the same 32 digits without the dashes. The kernel's boot id and
 * `mkfs --uuid` read them.
 */
#ifndef LZ_COMMON_UUID_H
#define LZ_COMMON_UUID_H

#include <stddef.h>
#include <stdint.h>

#define UUID_LEN 16

/* The len bytes at s, one UUID and nothing else, into out; -EINVAL if they are not one. */
int uuid_parse(const char *s, size_t len, uint8_t out[UUID_LEN]);

#endif
