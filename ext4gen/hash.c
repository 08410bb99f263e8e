/* SPDX-License-Identifier: MIT */
/*
 * The ext4 directory name hash (what the kernel's ext4fs_dirhash() computes and what
 * htree lookups search by). Three algorithms, each with a signed-char and an
 * unsigned-char flavour (the superblock's s_flags tells which one a filesystem uses):
 *
 *   legacy    a two-word recurrence over the bytes, no seed, no minor hash;
 *   half_md4  MD4's three rounds over 32-byte pieces of the name, seeded by s_hash_seed;
 *   tea       16 TEA cycles over 16-byte pieces of the name, seeded the same way.
 *
 * Written from the algorithm descriptions (Documentation/filesystems/ext4, RFC 1320 for
 * the MD4 round functions) and checked against e2fsprogs' debugfs "dx_hash".
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dir.h"
#include "ext4_fs.h"

/* MD4's initial state, used whenever s_hash_seed is all zeros. */
static const uint32_t md4_iv[4] = { 0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476 };

#define HTREE_EOF_HASH 0xfffffffeu	/* the kernel's EXT4_HTREE_EOF_32BIT << 1 */

static inline uint32_t rotl32(uint32_t v, unsigned int s)
{
	return (v << s) | (v >> (32 - s));
}

/* Byte i of the name as the hash sees it: sign-extended unless unsigned_chars. */
static inline uint32_t name_byte(const uint8_t *s, size_t i, bool unsigned_chars)
{
	return unsigned_chars ? (uint32_t)s[i] : (uint32_t)(int32_t)(int8_t)s[i];
}

static uint32_t legacy_hash(const uint8_t *s, size_t len, bool unsigned_chars)
{
	uint32_t a = 0x12a3fe2d, b = 0x37abe8f9;

	for (size_t i = 0; i < len; i++) {
		uint32_t h = b + (a ^ (name_byte(s, i, unsigned_chars) * 7152373u));

		if (h & 0x80000000u)
			h -= 0x7fffffffu;
		b = a;
		a = h;
	}
	return a << 1;
}

/*
 * Pack up to nwords * 4 bytes of the name (starting at s, with left bytes of the name
 * remaining from there on) into nwords words, first byte in the most significant
 * position. Words are prefilled with the remaining length replicated into all four bytes,
 * which is also what fills the words past the end of the name (names are at most 255
 * bytes, so that is one byte repeated).
 */
static void pack_words(const uint8_t *s, size_t left, bool unsigned_chars, uint32_t *w,
		       unsigned int nwords)
{
	uint32_t fill = (uint32_t)left | (uint32_t)left << 8;
	size_t take = left < (size_t)nwords * 4 ? left : (size_t)nwords * 4;
	unsigned int k;

	fill |= fill << 16;
	for (k = 0; k < nwords; k++)
		w[k] = fill;
	for (size_t i = 0; i < take; i++) {
		uint32_t *word = &w[i / 4];

		*word = (*word << 8) + name_byte(s, i, unsigned_chars);
	}
}

/* MD4 round functions (RFC 1320) and the two round constants. */
#define MD4_F(x, y, z) (((x) & (y)) | (~(x) & (z)))
#define MD4_G(x, y, z) (((x) & (y)) | ((x) & (z)) | ((y) & (z)))
#define MD4_H(x, y, z) ((x) ^ (y) ^ (z))
#define MD4_K2 0x5a827999u
#define MD4_K3 0x6ed9eba1u

/*
 * One MD4 step, "[abcd k s]" in RFC 1320's notation: a = (a + f(b, c, d) + x) <<< s.
 * Written out step by step below so that the compiler keeps everything in registers.
 */
#define MD4_STEP(f, a, b, c, d, x, s) ((a) = rotl32((a) + f((b), (c), (d)) + (x), (s)))

/* One MD4 compression over 8 words instead of 16: three rounds of eight steps. */
static void half_md4(uint32_t st[4], const uint32_t w[8])
{
	uint32_t a = st[0], b = st[1], c = st[2], d = st[3];

	/* round 1: words in order */
	MD4_STEP(MD4_F, a, b, c, d, w[0], 3);
	MD4_STEP(MD4_F, d, a, b, c, w[1], 7);
	MD4_STEP(MD4_F, c, d, a, b, w[2], 11);
	MD4_STEP(MD4_F, b, c, d, a, w[3], 19);
	MD4_STEP(MD4_F, a, b, c, d, w[4], 3);
	MD4_STEP(MD4_F, d, a, b, c, w[5], 7);
	MD4_STEP(MD4_F, c, d, a, b, w[6], 11);
	MD4_STEP(MD4_F, b, c, d, a, w[7], 19);

	/* round 2: odd words, then even ones */
	MD4_STEP(MD4_G, a, b, c, d, w[1] + MD4_K2, 3);
	MD4_STEP(MD4_G, d, a, b, c, w[3] + MD4_K2, 5);
	MD4_STEP(MD4_G, c, d, a, b, w[5] + MD4_K2, 9);
	MD4_STEP(MD4_G, b, c, d, a, w[7] + MD4_K2, 13);
	MD4_STEP(MD4_G, a, b, c, d, w[0] + MD4_K2, 3);
	MD4_STEP(MD4_G, d, a, b, c, w[2] + MD4_K2, 5);
	MD4_STEP(MD4_G, c, d, a, b, w[4] + MD4_K2, 9);
	MD4_STEP(MD4_G, b, c, d, a, w[6] + MD4_K2, 13);

	/* round 3 */
	MD4_STEP(MD4_H, a, b, c, d, w[3] + MD4_K3, 3);
	MD4_STEP(MD4_H, d, a, b, c, w[7] + MD4_K3, 9);
	MD4_STEP(MD4_H, c, d, a, b, w[2] + MD4_K3, 11);
	MD4_STEP(MD4_H, b, c, d, a, w[6] + MD4_K3, 15);
	MD4_STEP(MD4_H, a, b, c, d, w[1] + MD4_K3, 3);
	MD4_STEP(MD4_H, d, a, b, c, w[5] + MD4_K3, 9);
	MD4_STEP(MD4_H, c, d, a, b, w[0] + MD4_K3, 11);
	MD4_STEP(MD4_H, b, c, d, a, w[4] + MD4_K3, 15);

	st[0] += a;
	st[1] += b;
	st[2] += c;
	st[3] += d;
}

/* 16 TEA cycles with the name words as the key, mixing st[0] and st[1]. */
static void tea_mix(uint32_t st[4], const uint32_t k[4])
{
	uint32_t y = st[0], z = st[1], sum = 0;

	for (int i = 0; i < 16; i++) {
		sum += 0x9e3779b9u;
		y += ((z << 4) + k[0]) ^ (z + sum) ^ ((z >> 5) + k[1]);
		z += ((y << 4) + k[2]) ^ (y + sum) ^ ((y >> 5) + k[3]);
	}
	st[0] += y;
	st[1] += z;
}

uint32_t dir_name_hash(const char *name, size_t len, uint8_t hash_version, bool unsigned_chars,
		       const uint32_t seed[4], uint32_t *minor)
{
	const uint8_t *s = (const uint8_t *)name;
	uint32_t st[4], w[8], major, minor_hash = 0;
	size_t off;

	if (hash_version >= EXT4_HASH_LEGACY_UNSIGNED && hash_version <= EXT4_HASH_TEA_UNSIGNED) {
		hash_version -= EXT4_HASH_LEGACY_UNSIGNED;
		unsigned_chars = true;
	}

	st[0] = md4_iv[0];
	st[1] = md4_iv[1];
	st[2] = md4_iv[2];
	st[3] = md4_iv[3];
	if (seed && (seed[0] | seed[1] | seed[2] | seed[3])) {
		st[0] = seed[0];
		st[1] = seed[1];
		st[2] = seed[2];
		st[3] = seed[3];
	}

	switch (hash_version) {
	case EXT4_HASH_HALF_MD4:
		for (off = 0; off < len; off += 32) {
			pack_words(s + off, len - off, unsigned_chars, w, 8);
			half_md4(st, w);
		}
		major = st[1];
		minor_hash = st[2];
		break;
	case EXT4_HASH_TEA:
		for (off = 0; off < len; off += 16) {
			pack_words(s + off, len - off, unsigned_chars, w, 4);
			tea_mix(st, w);
		}
		major = st[0];
		minor_hash = st[1];
		break;
	case EXT4_HASH_LEGACY:
	default:
		major = legacy_hash(s, len, unsigned_chars);
		break;
	}

	/*
	 * The low bit marks hash collisions in index entries; the top value means EOF to
	 * readdir, so the kernel moves it down one step. (e2fsprogs' ext2fs_dirhash() skips
	 * that step. It only matters for a name hashing to exactly 0xfffffffe: such a name
	 * lands in the last leaf, whose range e2fsck lets run up to 0xfffffffe anyway.)
	 */
	major &= ~1u;
	if (major == HTREE_EOF_HASH)
		major = HTREE_EOF_HASH - 2;
	if (minor)
		*minor = minor_hash;
	return major;
}
