/* SPDX-License-Identifier: MIT */
/* Re-hashing every chunk of a store. */
#ifndef LZ_CAS_VERIFY_H
#define LZ_CAS_VERIFY_H

#include <stdbool.h>
#include <stdint.h>

#include "store.h"
#include "walk_progress.h"
#include "../common/test_hook.h"

struct verify_result {
	uint64_t checked, ok, corrupt;
	uint64_t plain_checked, plain_ok, plain_bad;  /* plain copies (STORE/plain) */
};

/*
 * Decompress and re-hash every chunk; report(arg, hex, reason, false) is called for each bad
 * one. Then re-hash every plain copy (cas/plain.h): a bad one is removed (it is derived data,
 * made again from its chunk) and reported with plain true. progress (may be NULL): the
 * chunks and plain copies checked.
 * Returns 0 (even with corrupt chunks) or -errno when the store cannot be read.
 */
typedef void (*verify_report_fn)(void *arg, const char *hex, const char *why, bool plain);
int store_verify(struct store *s, verify_report_fn report, void *arg,
		 struct cas_walk_progress *progress, struct verify_result *res);
/* Check one chunk: 0 ok, -EBADMSG corrupt (why set), -ENOENT missing, -errno. */
TEST_HOOK
int store_verify_one(struct store *s, const uint8_t d[SHA256_LEN], char *why, size_t why_len);

#endif
