/* SPDX-License-Identifier: MIT */
#include "repair.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/why.h"
#include "chunk.h"

int cas_repair_chunk(struct store *s, struct remote *r, const uint8_t d[SHA256_LEN], char *why,
		     size_t why_len)
{
	struct chunk_codec *codec = NULL;
	char cwhy[WHY_MAX] = "";
	uint8_t *frame = NULL, *out = NULL;
	size_t len, n;
	int ret;

	if (why_len)
		why[0] = '\0';
	ret = remote_get_prio(r, d, NULL, &frame, &len);
	if (ret == -ENOENT)
		return why_set(why, why_len, ret, "the remote does not have it");
	if (ret)
		return why_set(why, why_len, ret, "fetching it from the remote: %s", strerror(-ret));
	codec = chunk_codec_new(0);
	out = malloc(CHUNK_SIZE_MAX);
	ret = codec && out ? chunk_verify(codec, d, frame, len, out, CHUNK_SIZE_MAX, &n, cwhy,
					   sizeof(cwhy))
			   : -ENOMEM;
	if (ret == -EBADMSG)
		why_set(why, why_len, ret, "the remote's copy is bad too: %s",
			cwhy[0] ? cwhy : "corrupt");
	else if (ret)
		why_set(why, why_len, ret, "%s", strerror(-ret));
	if (!ret) {
		ret = store_replace_chunk(s, d, frame, len);
		if (ret)
			why_set(why, why_len, ret, "replacing it in the store: %s", strerror(-ret));
	}
	chunk_codec_free(codec);
	free(out);
	free(frame);
	return ret;
}
