/* SPDX-License-Identifier: MIT */
/* SHA-256 over OpenSSL EVP, and hex helpers for digests. */
#ifndef LZ_COMMON_SHA256_H
#define LZ_COMMON_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32
#define SHA256_HEX_LEN 64

struct sha256_ctx; /* opaque, owns an EVP_MD_CTX */

struct sha256_ctx *sha256_new(void);
void sha256_free(struct sha256_ctx *c);
int sha256_update(struct sha256_ctx *c, const void *data, size_t len);
int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_LEN]); /* resets c */

/* One-shot digest; returns 0 or -ENOMEM/-EIO. */
int sha256_buf(const void *data, size_t len, uint8_t out[SHA256_LEN]);

/* hex: writes 64 lowercase hex chars + NUL. */
void sha256_to_hex(const uint8_t d[SHA256_LEN], char hex[SHA256_HEX_LEN + 1]);
/* The value of one hex digit (either case), or -1. */
int hex_nibble(char c);
/* Parses exactly 64 hex chars (either case); returns 0 or -EINVAL. */
int sha256_from_hex(const char *hex, uint8_t d[SHA256_LEN]);

#endif
