/* SPDX-License-Identifier: MIT */
#include "repair.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/why.h"
#include "chunk.h"

/* frame → tmp/NAME, fsync, rename over chunks/REL, fsync chunks/xx. */
static int replace(struct store *s, const uint8_t d[SHA256_LEN], const void *frame, size_t len)
{
	char rel[STORE_REL_LEN], name[NAME_MAX + 1], path[PATH_MAX];
	int tmpfd = store_tmp_dir(s), chunksfd, fd, sub, ret;

	if (tmpfd < 0)
		return tmpfd;
	if (snprintf(path, sizeof(path), "%s/chunks", store_dir(s)) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	chunksfd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (chunksfd < 0)
		return -errno;
	store_rel_path(d, rel);
	store_tmp_name(s, d, name, sizeof(name));
	fd = openat(tmpfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		close(chunksfd);
		return ret;
	}
	ret = fs_write_full(fd, frame, len);
	if (!ret && fsync(fd) < 0)
		ret = -errno;
	close(fd);
	if (!ret && renameat(tmpfd, name, chunksfd, rel) < 0)
		ret = -errno;
	if (ret) {
		unlinkat(tmpfd, name, 0);
	} else {
		rel[2] = '\0';
		sub = openat(chunksfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (sub < 0 || fsync(sub) < 0)
			ret = -errno;
		if (sub >= 0)
			close(sub);
	}
	close(chunksfd);
	return ret;
}

int cas_repair_chunk(struct store *s, struct remote *r, const uint8_t d[SHA256_LEN], char *why,
		     size_t why_len)
{
	struct chunk_codec *codec = NULL;
	const char *cwhy = NULL;
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
	ret = codec && out ? chunk_verify(codec, d, frame, len, out, CHUNK_SIZE_MAX, &n, &cwhy)
			   : -ENOMEM;
	if (ret == -EBADMSG)
		why_set(why, why_len, ret, "the remote's copy is bad too: %s",
			cwhy ? cwhy : "corrupt");
	else if (ret)
		why_set(why, why_len, ret, "%s", strerror(-ret));
	if (!ret) {
		ret = replace(s, d, frame, len);
		if (ret)
			why_set(why, why_len, ret, "replacing it in the store: %s", strerror(-ret));
	}
	chunk_codec_free(codec);
	free(out);
	free(frame);
	return ret;
}
