/* SPDX-License-Identifier: MIT */
/*
 * --json of the one-shot commands (import, mkfs, export, push, cas stats, cas verify): the
 * summary as one JSON object on stdout, in place of the text (notes stay on stderr).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/sha256.h"
#include "cli.h"

void cli_json_digest(struct json_buf *b, const char *key, const uint8_t *digest)
{
	char v[7 + SHA256_HEX_LEN + 1];

	memcpy(v, "sha256:", 7);
	sha256_to_hex(digest, v + 7);
	json_field_str(b, key, v);
}

void cli_json_path(struct json_buf *b, const char *key, const char *path)
{
	json_field_bytes(b, key, path, strlen(path));
}

int cli_json_print(struct json_buf *b)
{
	int err = b->err;

	if (!err && b->p)
		printf("%s\n", b->p);
	json_buf_free(b);
	if (err) {
		log_error("%s", strerror(-err));
		return 1;
	}
	return 0;
}
