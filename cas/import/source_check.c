/* SPDX-License-Identifier: MIT */
/*
 * Refusing a SRC that would import as something else than the image it holds, before anything
 * is written: an OCI image layout or an unpacked docker archive given as a plain DIR (its
 * blobs would become the image), a docker-archive or OCI-archive tar given as a plain FILE.tar
 * (the archive's own members would), and a transport prefix lazyblk does not have
 * (containers-storage:, dir:, …), which would otherwise read as a missing file.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../common/dl_archive.h"
#include "../../common/fsutil.h"
#include "import.h"

#define SOURCE_FORMS                                                                     \
	"DIR, FILE.tar[.gz|.zst|.xz], oci:DIR[:TAG], oci-archive:FILE[:TAG], "             \
	"docker-archive:FILE.tar or docker://HOST[:PORT]/REPO[:TAG|@DIGEST]"
#define PEEK_JSON_MAX 65536     /* of a manifest.json, enough to find "Layers" */
#define PEEK_MEMBERS_MAX 100000 /* archive-shaped members looked at, at most */

enum tar_kind { TAR_PLAIN, TAR_DOCKER, TAR_OCI };

/* "word:" or "word://" at the start of src (a URI scheme's characters): its length, or 0. */
static size_t transport_len(const char *src)
{
	size_t n = 0;

	if (!isalpha((unsigned char)src[0]))
		return 0;
	while (isalnum((unsigned char)src[n]) || src[n] == '+' || src[n] == '-' || src[n] == '.')
		n++;
	if (src[n] != ':')
		return 0;
	return strncmp(src + n + 1, "//", 2) ? n + 1 : n + 3;
}

static bool is_hex64(const char *s)
{
	for (int i = 0; i < 64; i++)
		if (!isxdigit((unsigned char)s[i]))
			return false;
	return true;
}

static bool name_is(const char *name, size_t n, const char *what)
{
	return n == strlen(what) && !strncmp(name, what, n);
}

/*
 * A name found at the top of a docker or OCI image archive: blobs/…, index.json,
 * oci-layout, manifest.json, repositories, <64 hex>.tar, <64 hex>.json, <64 hex>/….
 * "." (the archive's root, as tar -C DIR . writes it) fits as well.
 */
static bool archive_shaped(const char *name)
{
	size_t n;

	while (!strncmp(name, "./", 2))
		name += 2;
	n = strlen(name);
	while (n && name[n - 1] == '/')
		n--;
	if (!n || (n == 1 && name[0] == '.'))
		return true;
	if ((n == 5 || (n > 5 && name[5] == '/')) && !strncmp(name, "blobs", 5))
		return true;
	if (n >= 64 && is_hex64(name))
		return n == 64 || name[64] == '/' || (n == 68 && !strncmp(name + 64, ".tar", 4)) ||
		       (n == 69 && !strncmp(name + 64, ".json", 5));
	return name_is(name, n, "index.json") || name_is(name, n, "oci-layout") ||
	       name_is(name, n, "manifest.json") || name_is(name, n, "repositories");
}

static bool top_is(const char *name, const char *what)
{
	while (!strncmp(name, "./", 2))
		name += 2;
	return !strcmp(name, what);
}

/* A docker manifest.json: a JSON list whose images name their Layers. */
static bool docker_manifest(const char *buf)
{
	return strstr(buf, "\"Layers\"") != NULL;
}

/*
 * What the tar at path is, from its first members: it is an image archive when every member
 * up to manifest.json (with Layers) or oci-layout has a name of an image archive's top.
 * The peek ends at the first other name, which is the first member of an ordinary tar; a
 * tar libarchive cannot read is left to the import to report.
 */
static enum tar_kind tar_peek(const char *path)
{
	char json[PEEK_JSON_MAX + 1];
	enum tar_kind kind = TAR_PLAIN;
	struct archive_entry *e;
	struct archive *a;
	struct stat st;
	int fd;

	if (dl_archive_load())
		return TAR_PLAIN;
	fd = fs_open_regular(AT_FDCWD, path, 0, &st); /* swapped for a FIFO: not read */
	if (fd < 0)
		return TAR_PLAIN; /* the import says why */
	a = sym_archive_read_new();
	if (!a) {
		close(fd);
		return TAR_PLAIN;
	}
	sym_archive_read_support_filter_all(a);
	sym_archive_read_support_format_tar(a);
	if (sym_archive_read_open_fd(a, fd, 1 << 20) != ARCHIVE_OK)
		goto out;
	for (int i = 0; i < PEEK_MEMBERS_MAX; i++) {
		const char *name;

		if (sym_archive_read_next_header(a, &e) < ARCHIVE_WARN)
			break;
		name = sym_archive_entry_pathname(e);
		if (!name || !archive_shaped(name))
			break;
		if (top_is(name, "oci-layout")) {
			kind = TAR_OCI;
			break;
		}
		if (top_is(name, "manifest.json")) {
			size_t fill = 0;
			la_ssize_t r;

			while (fill < PEEK_JSON_MAX &&
			       (r = sym_archive_read_data(a, json + fill, PEEK_JSON_MAX - fill)) > 0)
				fill += (size_t)r;
			json[fill] = '\0';
			if (docker_manifest(json))
				kind = TAR_DOCKER;
			break;
		}
	}
out:
	sym_archive_read_free(a);
	close(fd);
	return kind;
}

/* DIR/manifest.json is a docker archive's (a FIFO or anything not regular is not read). */
static bool dir_docker_manifest(int dfd)
{
	char buf[PEEK_JSON_MAX + 1];
	struct stat st;
	int fd = fs_open_regular(dfd, "manifest.json", O_NOFOLLOW, &st);
	ssize_t n;

	if (fd < 0)
		return false;
	n = read(fd, buf, PEEK_JSON_MAX);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	return docker_manifest(buf);
}

static int check_dir(struct import_ctx *ic, const char *src)
{
	int dfd = open(src, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	struct stat st;
	bool oci, docker;

	if (dfd < 0)
		return 0; /* import_dir says why */
	oci = fstatat(dfd, "oci-layout", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode);
	docker = !oci && dir_docker_manifest(dfd);
	close(dfd);
	if (oci)
		return why_first(ic->why, ic->why_len, -EINVAL,
				 "%s is an OCI image layout; to import the image, use oci:%s",
				 src, src);
	if (docker)
		return why_first(ic->why, ic->why_len, -EINVAL,
				 "%s is an unpacked docker archive; to import the image, tar it "
				 "(tar -cf FILE.tar -C %s .) and use docker-archive:FILE.tar",
				 src, src);
	return 0;
}

static int check_file(struct import_ctx *ic, const char *src)
{
	switch (tar_peek(src)) {
	case TAR_DOCKER:
		return why_first(ic->why, ic->why_len, -EINVAL,
				 "%s is a docker archive; to import the image, use "
				 "docker-archive:%s", src, src);
	case TAR_OCI:
		return why_first(ic->why, ic->why_len, -EINVAL,
				 "%s is an OCI image archive; to import the image, use "
				 "oci-archive:%s", src, src);
	default:
		return 0;
	}
}

int import_check_source(struct import_ctx *ic, const char *src)
{
	struct stat st;
	size_t tn;

	if (!strncmp(src, "docker://", 9)) {
		const char *slash = strchr(src + 9, '/');

		if (!slash || slash == src + 9 || !slash[1])
			return why_first(ic->why, ic->why_len, -EINVAL,
					 "%s: want docker://HOST[:PORT]/REPO[:TAG|"
					 "@sha256:DIGEST] (the registry's host is required)",
					 src);
		return 0;
	}
	if (!strncmp(src, "oci:", 4) || !strncmp(src, "docker-archive:", 15) ||
	    !strncmp(src, "oci-archive:", 12))
		return 0;
	if (stat(src, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return check_dir(ic, src);
		return S_ISREG(st.st_mode) ? check_file(ic, src) : 0;
	}
	tn = transport_len(src);
	if (tn && (errno == ENOENT || errno == ENOTDIR))
		return why_first(ic->why, ic->why_len, -EINVAL,
				 "%s: unknown source transport '%.*s' (SRC is "
				 SOURCE_FORMS ")", src, (int)tn, src);
	return 0; /* run_source says why */
}
