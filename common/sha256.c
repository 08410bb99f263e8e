/* SPDX-License-Identifier: MIT */
#include "sha256.h"

#include <errno.h>
#include <stdlib.h>

#include <openssl/evp.h>

struct sha256_ctx {
	EVP_MD_CTX *md;
};

struct sha256_ctx *sha256_new(void)
{
	struct sha256_ctx *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->md = EVP_MD_CTX_new();
	if (!c->md || !EVP_DigestInit_ex(c->md, EVP_sha256(), NULL)) {
		sha256_free(c);
		return NULL;
	}
	return c;
}

void sha256_free(struct sha256_ctx *c)
{
	if (!c)
		return;
	EVP_MD_CTX_free(c->md);
	free(c);
}

int sha256_update(struct sha256_ctx *c, const void *data, size_t len)
{
	return EVP_DigestUpdate(c->md, data, len) ? 0 : -EIO;
}

int sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_LEN])
{
	unsigned int n = 0;

	if (!EVP_DigestFinal_ex(c->md, out, &n) || n != SHA256_LEN)
		return -EIO;
	return EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) ? 0 : -EIO;
}

int sha256_buf(const void *data, size_t len, uint8_t out[SHA256_LEN])
{
	unsigned int n = 0;

	if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != SHA256_LEN)
		return -EIO;
	return 0;
}

void sha256_to_hex(const uint8_t d[SHA256_LEN], char hex[SHA256_HEX_LEN + 1])
{
	static const char digits[] = "0123456789abcdef";

	for (int i = 0; i < SHA256_LEN; i++) {
		hex[2 * i] = digits[d[i] >> 4];
		hex[2 * i + 1] = digits[d[i] & 15];
	}
	hex[SHA256_HEX_LEN] = '\0';
}

int hex_nibble(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sha256_from_hex(const char *hex, uint8_t d[SHA256_LEN])
{
	for (int i = 0; i < SHA256_LEN; i++) {
		int hi = hex_nibble(hex[2 * i]), lo;

		if (hi < 0)
			return -EINVAL;
		lo = hex_nibble(hex[2 * i + 1]);
		if (lo < 0)
			return -EINVAL;
		d[i] = (uint8_t)(hi << 4 | lo);
	}
	return hex[SHA256_HEX_LEN] == '\0' ? 0 : -EINVAL;
}
