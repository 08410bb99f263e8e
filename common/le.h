/* SPDX-License-Identifier: MIT */
/*
 * Loads and stores of fixed-width integers at any byte address, in a fixed byte order: the
 * one set of helpers for every on-disk and on-the-wire format lazyblk reads or writes.
 *
 *   leN_get(p), leN_put(p, v)   little-endian: ext4, virtio, ACPI, the x86 boot protocol
 *   beN_get(p), beN_put(p, v)   big-endian: the NBD protocol, the jbd2 journal
 *
 * p may be unaligned: every access goes through memcpy (one plain load or store on x86),
 * then the host's byte order is converted with <endian.h>, so the result does not depend
 * on the host. Stores write exactly N / 8 bytes; values are truncated by the parameter's
 * type as with any conversion.
 */
#ifndef LZ_COMMON_LE_H
#define LZ_COMMON_LE_H

#include <endian.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t le16_get(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return le16toh(v);
}

static inline uint32_t le32_get(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return le32toh(v);
}

static inline uint64_t le64_get(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return le64toh(v);
}

static inline void le16_put(void *p, uint16_t v)
{
	v = htole16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le32_put(void *p, uint32_t v)
{
	v = htole32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void le64_put(void *p, uint64_t v)
{
	v = htole64(v);
	memcpy(p, &v, sizeof(v));
}

static inline uint16_t be16_get(const void *p)
{
	uint16_t v;

	memcpy(&v, p, sizeof(v));
	return be16toh(v);
}

static inline uint32_t be32_get(const void *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return be32toh(v);
}

static inline uint64_t be64_get(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return be64toh(v);
}

static inline void be16_put(void *p, uint16_t v)
{
	v = htobe16(v);
	memcpy(p, &v, sizeof(v));
}

static inline void be32_put(void *p, uint32_t v)
{
	v = htobe32(v);
	memcpy(p, &v, sizeof(v));
}

static inline void be64_put(void *p, uint64_t v)
{
	v = htobe64(v);
	memcpy(p, &v, sizeof(v));
}

#endif
