/* SPDX-License-Identifier: MIT */
#include "verify.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "chunk.h"
#include "plain.h"

struct verify_state {
	struct store *s;
	struct chunk_codec *codec;
	uint8_t *out;
	verify_report_fn report;
	void *arg;
	struct verify_result *res;
	struct cas_walk_progress *progress;
};

static int check(struct store *s, struct chunk_codec *codec, uint8_t *out,
		 const uint8_t d[SHA256_LEN], char *why, size_t why_len)
{
	uint8_t *frame;
	size_t len, n;
	int ret;

	ret = store_read(s, d, &frame, &len);
	if (ret == -EBADMSG)
		why_set(why, why_len, ret, "not a regular file");
	if (ret)
		return ret;
	ret = chunk_verify(codec, d, frame, len, out, CHUNK_SIZE_MAX, &n, why, why_len);
	free(frame);
	return ret;
}

int store_verify_one(struct store *s, const uint8_t d[SHA256_LEN], char *why, size_t why_len)
{
	struct chunk_codec *codec = chunk_codec_new(0);
	uint8_t *out = malloc(CHUNK_SIZE_MAX);
	int ret = -ENOMEM;

	if (codec && out)
		ret = check(s, codec, out, d, why, why_len);
	chunk_codec_free(codec);
	free(out);
	return ret;
}

static int verify_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct verify_state *st = arg;
	char why[WHY_MAX] = "";
	char hex[SHA256_HEX_LEN + 1];
	int ret;

	(void)path;
	cas_walk_progress_step(st->progress);
	st->res->checked++;
	ret = check(st->s, st->codec, st->out, d, why, sizeof(why));
	if (ret == -ENOENT)
		return 0; /* removed while we walked: not corrupt */
	if (ret == -EBADMSG || ret == -EIO) {
		st->res->corrupt++;
		sha256_to_hex(d, hex);
		st->report(st->arg, hex, why[0] ? why : "unreadable", false);
		return 0;
	}
	if (ret)
		return ret;
	st->res->ok++;
	return 0;
}

static int verify_plain_one(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	struct verify_state *st = arg;
	char hex[SHA256_HEX_LEN + 1];
	char why[WHY_MAX] = "";
	uint64_t bytes;
	int ret;

	cas_walk_progress_step(st->progress);
	st->res->plain_checked++;
	ret = plain_verify_file(path, d, why, sizeof(why));
	if (ret == -ENOENT)
		return 0;
	if (ret == -EBADMSG || ret == -EIO) {
		st->res->plain_bad++;
		plain_remove(st->s, d, &bytes);
		sha256_to_hex(d, hex);
		st->report(st->arg, hex, why[0] ? why : "unreadable", true);
		return 0;
	}
	if (ret)
		return ret;
	st->res->plain_ok++;
	return 0;
}

int store_verify(struct store *s, verify_report_fn report, void *arg,
		 struct cas_walk_progress *progress, struct verify_result *res)
{
	struct verify_state st = { s, chunk_codec_new(0), malloc(CHUNK_SIZE_MAX), report, arg, res,
				   progress };
	int ret = -ENOMEM;

	memset(res, 0, sizeof(*res));
	if (st.codec && st.out)
		ret = cas_walk_progress_start(progress, s);
	if (!ret && st.codec && st.out)
		ret = store_foreach(s, verify_one, &st);
	if (!ret)
		ret = store_foreach_plain(s, verify_plain_one, &st);
	chunk_codec_free(st.codec);
	free(st.out);
	return ret;
}
