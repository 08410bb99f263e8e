// SPDX-License-Identifier: MIT
/*
 * Recipe memos of the initramfs builder (see memo.h). A memo is a text file
 * DIR/recipe-HEX:
 *
 *   lazyblk-initramfs-recipe-1
 *   cpio NAME
 *   file IDENTITY PATH          (one per file or directory read; IDENTITY "-": absent)
 */
#include "memo.h"

#include <errno.h>
#include <stdbool.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../common/digest_memo.h"
#include "../../common/fsutil.h"

#define MEMO_HEADER "lazyblk-initramfs-recipe-1\n"
#define MEMO_MAX (1u << 20)

static int memo_path(const char *dir, const uint8_t recipe[SHA256_LEN], char *buf, size_t len)
{
	char hex[SHA256_HEX_LEN + 1];
	int n;

	sha256_to_hex(recipe, hex);
	n = snprintf(buf, len, "%s/recipe-%s", dir, hex);
	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

/* A bare file name: no directory part, nothing hidden, nothing odd. */
static int name_ok(const char *s)
{
	return *s && *s != '.' && !strchr(s, '/') && strlen(s) < NAME_MAX;
}

int initramfs_memo_lookup(const char *dir, const uint8_t recipe[SHA256_LEN], char *cpio,
			  size_t len)
{
	char path[PATH_MAX], *save = NULL, *line;
	uint8_t *text = NULL;
	size_t n;
	struct stat st;
	int ret = -ENOENT;
	bool have_cpio = false;

	if (memo_path(dir, recipe, path, sizeof(path)) || fs_read_file(path, &text, &n))
		return -ENOENT;
	if (n > MEMO_MAX || n < sizeof(MEMO_HEADER) - 1 ||
	    memcmp(text, MEMO_HEADER, sizeof(MEMO_HEADER) - 1))
		goto out;
	for (line = strtok_r((char *)text + sizeof(MEMO_HEADER) - 1, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!strncmp(line, "cpio ", 5)) {
			if (have_cpio || !name_ok(line + 5) ||
			    snprintf(cpio, len, "%s/%s", dir, line + 5) >= (int)len)
				goto out;
			have_cpio = true;
		} else if (!strncmp(line, "file ", 5)) {
			char id[128], *sp = strchr(line + 5, ' ');

			/* the very file (or directory) the cpio was made from, or still absent */
			if (!sp || sp[1] != '/')
				goto out;
			if (stat(sp + 1, &st))
				snprintf(id, sizeof(id), "%s", errno == ENOENT ? "-" : "?");
			else if (digest_memo_identity(&st, id, sizeof(id)))
				goto out;
			if ((size_t)(sp - (line + 5)) != strlen(id) || memcmp(line + 5, id, strlen(id)))
				goto out;
		} else {
			goto out;
		}
	}
	if (have_cpio && !stat(cpio, &st) && S_ISREG(st.st_mode) && st.st_size > 0)
		ret = 0;
out:
	free(text);
	return ret;
}

void initramfs_memo_store(const char *dir, const uint8_t recipe[SHA256_LEN], const char *cpio,
			  const char *const *paths, const char *const *ids, size_t n)
{
	char path[PATH_MAX];
	size_t cap = sizeof(MEMO_HEADER) + strlen(cpio) + 8, used;
	char *text;

	if (!name_ok(cpio) || memo_path(dir, recipe, path, sizeof(path)))
		return;
	for (size_t i = 0; i < n; i++) {
		if (paths[i][0] != '/' || strchr(paths[i], '\n') || !ids[i][0] || strchr(ids[i], ' '))
			return; /* cannot be written down unambiguously: no memo */
		cap += strlen(paths[i]) + strlen(ids[i]) + 8;
	}
	if (cap > MEMO_MAX)
		return;
	text = malloc(cap);
	if (!text)
		return;
	used = (size_t)snprintf(text, cap, "%scpio %s\n", MEMO_HEADER, cpio);
	for (size_t i = 0; i < n; i++)
		used += (size_t)snprintf(text + used, cap - used, "file %s %s\n", ids[i], paths[i]);
	(void)fs_write_file_atomic(path, text, used, INITRAMFS_CACHE_MODE);
	free(text);
}
