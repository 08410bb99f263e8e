/* SPDX-License-Identifier: MIT */
/* An OCI image layout as open files (oci_files.h): memfds and blobs staged in STORE/tmp. */
#include "oci_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../common/fsutil.h"
#include "../../common/grow.h"

static struct oci_file *find(const struct oci_files *f, const char *name)
{
	for (size_t i = 0; i < f->n; i++)
		if (!strcmp(f->v[i].name, name))
			return &f->v[i];
	return NULL;
}

bool oci_files_has(const struct oci_files *f, const char *name)
{
	return find(f, name) != NULL;
}

int oci_files_open(const struct oci_files *f, const char *name)
{
	struct oci_file *e = find(f, name);
	int fd;

	if (!e)
		return -ENOENT;
	fd = fcntl(e->fd, F_DUPFD_CLOEXEC, 0);
	return fd < 0 ? -errno : fd;
}

static struct oci_file *add(struct oci_files *f, const char *name)
{
	struct oci_file *e;

	if (find(f, name))
		return NULL;
	if (!grow_from((void **)&f->v, &f->cap, f->n + 1, sizeof(*f->v), 16))
		return NULL;
	e = &f->v[f->n];
	memset(e, 0, sizeof(*e));
	e->fd = -1;
	e->name = strdup(name);
	if (!e->name)
		return NULL;
	f->n++;
	return e;
}

int oci_files_add_mem(struct oci_files *f, const char *name, const void *data, size_t len)
{
	struct oci_file *e = find(f, name) ? NULL : add(f, name);
	int ret;

	if (!e)
		return find(f, name) ? -EEXIST : -ENOMEM;
	e->fd = memfd_create("lazyblk-oci", MFD_CLOEXEC);
	if (e->fd < 0)
		return -errno;
	ret = fs_write_full(e->fd, data, len);
	return ret;
}

int oci_files_add_blob(struct oci_files *f, const uint8_t d[SHA256_LEN], int *fd)
{
	char name[16 + SHA256_HEX_LEN], hex[SHA256_HEX_LEN + 1], tmp[SHA256_HEX_LEN + 48];
	struct oci_file *e;
	int dfd;

	sha256_to_hex(d, hex);
	snprintf(name, sizeof(name), "blobs/sha256/%s", hex);
	if (find(f, name))
		return -EEXIST;
	dfd = store_tmp_dir(f->store);
	if (dfd < 0)
		return dfd;
	e = add(f, name);
	if (!e)
		return -ENOMEM;
	store_tmp_name(f->store, d, tmp, sizeof(tmp));
	e->tmp = strdup(tmp);
	if (!e->tmp)
		return -ENOMEM;
	e->fd = openat(dfd, tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (e->fd < 0) {
		free(e->tmp);
		e->tmp = NULL;
		return -errno;
	}
	*fd = e->fd;
	return 0;
}

void oci_files_free(struct oci_files *f)
{
	int dfd = f->store ? store_tmp_dir(f->store) : -1;

	for (size_t i = 0; i < f->n; i++) {
		if (f->v[i].fd >= 0)
			close(f->v[i].fd);
		if (f->v[i].tmp && dfd >= 0)
			unlinkat(dfd, f->v[i].tmp, 0);
		free(f->v[i].tmp);
		free(f->v[i].name);
	}
	free(f->v);
	f->v = NULL;
	f->n = f->cap = 0;
}
