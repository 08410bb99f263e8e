/* SPDX-License-Identifier: MIT */
/* A VM snapshot's document as files: STORE/snapshots/<hex>.json, DIR/snapshot.json. */
#include "snapfile.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/fsutil.h"

int snapfile_write(const char *store_dir, const char *dir, const void *json, size_t len,
		   uint8_t id[SHA256_LEN], char *why, size_t why_len)
{
	char path[PATH_MAX], hex[SHA256_HEX_LEN + 1];
	uint8_t sum[SHA256_LEN];
	int ret;

	ret = sha256_buf(json, len, sum);
	if (ret)
		return why_set(why, why_len, ret, "sha256: %s", strerror(-ret));
	if (id)
		memcpy(id, sum, SHA256_LEN);
	sha256_to_hex(sum, hex);
	if (store_dir) {
		snprintf(path, sizeof(path), "%s/" SNAPFILE_DIR, store_dir);
		ret = fs_mkdir_p(path, 0755);
		if (!ret) {
			snprintf(path, sizeof(path), "%s/" SNAPFILE_DIR "/%s.json", store_dir, hex);
			ret = fs_write_file_atomic(path, json, len, FS_DATA_MODE);
		}
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	}
	if (dir) {
		snprintf(path, sizeof(path), "%s/" SNAPFILE_NAME, dir);
		ret = fs_write_file_atomic(path, json, len, FS_DATA_MODE);
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	}
	return 0;
}

/* The digest a file's name promises: "<64 hex>.json" as its last component. */
static bool name_digest(const char *path, uint8_t d[SHA256_LEN])
{
	const char *base = strrchr(path, '/');
	char hex[SHA256_HEX_LEN + 1];

	base = base ? base + 1 : path;
	if (strlen(base) != SHA256_HEX_LEN + 5 || strcmp(base + SHA256_HEX_LEN, ".json"))
		return false;
	memcpy(hex, base, SHA256_HEX_LEN);
	hex[SHA256_HEX_LEN] = '\0';
	return strspn(hex, "0123456789abcdef") == SHA256_HEX_LEN && !sha256_from_hex(hex, d);
}

int snapfile_read(const char *path, struct snapfile *f, char *why, size_t why_len)
{
	char file[PATH_MAX], pw[WHY_MAX] = "", hex[SHA256_HEX_LEN + 1];
	uint8_t want[SHA256_LEN], *buf = NULL;
	struct stat st;
	int ret;

	memset(f, 0, sizeof(*f));
	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		snprintf(file, sizeof(file), "%s/" SNAPFILE_NAME, path);
	else
		snprintf(file, sizeof(file), "%s", path);
	ret = fs_read_file_max(file, SNAPDOC_MAX, &buf, &f->len);
	if (ret == -EFBIG)
		return why_set(why, why_len, ret, "%s: larger than a snapshot document (%u bytes)",
			       file, SNAPDOC_MAX);
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", file, fs_open_why(ret));
	f->json = (char *)buf;
	ret = sha256_buf(buf, f->len, f->id);
	if (!ret && name_digest(file, want) && memcmp(want, f->id, SHA256_LEN)) {
		sha256_to_hex(f->id, hex);
		ret = why_set(why, why_len, -EBADMSG, "%s: the document's sha256 is %s, not its "
			      "name: corrupt", file, hex);
	}
	if (!ret) {
		ret = snapdoc_parse(f->json, f->len, &f->d, pw, sizeof(pw));
		if (ret)
			why_set(why, why_len, ret, "%s: %s", file, pw[0] ? pw : strerror(-ret));
	}
	if (ret)
		snapfile_free(f);
	return ret;
}

int snapfile_load(const char *store_dir, const uint8_t id[SHA256_LEN], struct snapfile *f,
		  char *why, size_t why_len)
{
	char path[PATH_MAX], hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(id, hex);
	snprintf(path, sizeof(path), "%s/" SNAPFILE_DIR "/%s.json", store_dir, hex);
	return snapfile_read(path, f, why, why_len);
}

void snapfile_free(struct snapfile *f)
{
	free(f->json);
	memset(f, 0, sizeof(*f));
}

bool snapfile_is(const char *path)
{
	struct stat st;
	size_t n = strlen(path);

	if (!stat(path, &st) && S_ISDIR(st.st_mode))
		return true;
	return n > 5 && !strcmp(path + n - 5, ".json");
}
