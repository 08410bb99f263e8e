/* SPDX-License-Identifier: MIT */
#include "vm_snapshot_store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../blkd/disk/disk.h"
#include "../blkd/overlay/commit.h"
#include "../cas/store.h"
#include "../common/fsutil.h"
#include "../layout/layout.h"
#include "../vmsnap/doc.h"
#include "../vmsnap/snapfile.h"
#include "vm_snapshot.h"

struct vm_snapstore_job {
	struct store *store;
	char dir[PATH_MAX];
	char delta[PATH_MAX + 16];     /* the overlay's delta at the pause ("": none) */
	bool has_layout;
	const struct disk *disk;       /* the image (open while the VM lives) */
	uint8_t base[SHA256_LEN];      /* the image's top layout */
	struct rammap *map;            /* the new page map */
	struct snapdoc doc;
	struct vm_snapstore_result res;
};

static void job_free(struct vm_snapstore_job *j, bool remove_dir)
{
	char path[PATH_MAX + 32];

	if (!j)
		return;
	if (j->delta[0])
		unlink(j->delta);
	if (remove_dir) {
		snprintf(path, sizeof(path), "%s/%s", j->dir, SNAPFILE_NAME);
		unlink(path);
		rmdir(j->dir);
	}
	rammap_free(j->map);
	store_close(j->store);
	free(j);
}

/* Bits of the pages in fd's data extents (a booted VM's RAM memfd: the pages it touched). */
static int snapstore_extents(int fd, uint64_t size, uint64_t *bits)
{
	off_t pos = 0, end;

	while ((uint64_t)pos < size) {
		pos = lseek(fd, pos, SEEK_DATA);
		if (pos < 0)
			return errno == ENXIO ? 0 : -errno;
		end = lseek(fd, pos, SEEK_HOLE);
		if (end < 0)
			return -errno;
		if ((uint64_t)end > size)
			end = (off_t)size;
		for (uint64_t p = (uint64_t)pos / RAMMAP_PAGE; p * RAMMAP_PAGE < (uint64_t)end; p++)
			bits[p / 64] |= 1ull << (p % 64);
		pos = end;
	}
	return 0;
}

/* The RAM into the store: the pages that may have changed since ss->map. */
static int snapstore_ram(struct vm_snapstore *ss, const struct vm_parts *p,
			 struct vm_snapstore_job *j, char *why, size_t why_len)
{
	const struct vm_ram *ram = &p->kvm->ram;
	uint64_t npages = ram->size / RAMMAP_PAGE;
	struct ramstore_opts o = { .store = j->store, .parent = ss->map ? ss->map : ss->base_map };
	uint64_t *bits = NULL;
	int ret = 0;

	if (!ss->hashes) {
		ss->hashes = calloc(npages, sizeof(*ss->hashes));
		if (!ss->hashes)
			return why_set(why, why_len, -ENOMEM, "out of memory");
	}
	o.hashes = ss->hashes;
	if (ss->written || ram->fd >= 0) {   /* else RAM mapped from a file: every page */
		bits = calloc((npages + 63) / 64, sizeof(*bits));
		if (!bits)
			return why_set(why, why_len, -ENOMEM, "out of memory");
		ret = ss->written ? ss->written(ss->written_arg, bits, npages)
				  : snapstore_extents(ram->fd, ram->size, bits);
		if (ret)
			why_set(why, why_len, ret, "guest RAM: the pages written: %s",
				strerror(-ret));
		o.changed = bits;
	}
	if (!ret)
		ret = ramstore_write(&o, ram->map, ram->size, &j->map, &j->res.ram, why, why_len);
	free(bits);
	return ret;
}

/* The disk: its layout names it; its overlay's writes at this instant into j->delta. */
static int snapstore_disk(const struct vm_parts *p, struct vm_snapstore_job *j, bool *rw,
			  char *why, size_t why_len)
{
	uint64_t dirty = 0, zero = 0;
	char dwhy[WHY_MAX] = "";
	int ret;

	*rw = false;
	if (!p->disk || disk_layout_digest(p->disk, j->base))
		return 0;   /* not the lazy image */
	j->has_layout = true;
	j->disk = p->disk;
	snprintf(j->delta, sizeof(j->delta), "%s/.disk.delta", j->dir);
	ret = disk_snapshot(p->disk, j->delta, &dirty, &zero, dwhy, sizeof(dwhy));
	if (ret == -ENOENT) {
		j->delta[0] = '\0';   /* no overlay: the image, read-only */
		return 0;
	}
	if (ret) {
		why_set(why, why_len, ret, "disk: %s", dwhy[0] ? dwhy : strerror(-ret));
		j->delta[0] = '\0';
		return ret;
	}
	*rw = true;
	j->res.disk_blocks = dirty + zero;
	if (!dirty && !zero) {
		unlink(j->delta);
		j->delta[0] = '\0';   /* nothing written: the image as it is */
	}
	return 0;
}

static void snapdoc_from_state(struct snapdoc *d, const struct vm_snapshot_info *si)
{
	d->created = (uint64_t)time(NULL);
	d->mem_size = si->mem_size;
	d->ncpus = si->ncpus;
	memcpy(d->cpu_sig, si->cpu_sig, sizeof(d->cpu_sig));
	snprintf(d->cpu_model, sizeof(d->cpu_model), "%s", si->cpu_model);
	memcpy(d->kernel, si->kernel_sha, SHA256_LEN);
}

/* vm.state as a chunk, and what the document says of the machine. */
static int snapstore_state(const struct vm_parts *p, struct vm_snapstore_job *j, bool rw,
			   char *why, size_t why_len)
{
	struct vm_snapshot *s = NULL;
	uint8_t *blob = NULL;
	size_t len = 0;
	int ret = vm_snapshot_blob(p, rw, &blob, &len, why, why_len);

	if (!ret)
		ret = ramstore_put_blob(j->store, blob, len, &j->doc.state, why, why_len);
	if (!ret) {
		/* read back as a restore will: what the document says comes from there */
		ret = vm_snapshot_open_blob("vm.state", blob, len, &s, why, why_len);
		blob = NULL;
	}
	if (!ret)
		snapdoc_from_state(&j->doc, vm_snapshot_info(s));
	j->res.state_bytes = len;
	vm_snapshot_close(s);
	free(blob);
	return ret;
}

int vm_snapstore_take(struct vm_snapstore *ss, const struct vm_parts *p, const char *dir,
		      const char *store_dir, struct vm_snapstore_job **job, char *why,
		      size_t why_len)
{
	struct vm_snapstore_job *j = calloc(1, sizeof(*j));
	bool rw = false;
	int ret;

	*job = NULL;
	if (!j)
		return why_set(why, why_len, -ENOMEM, "out of memory");
	snprintf(j->dir, sizeof(j->dir), "%s", dir);
	if (mkdir(dir, 0700) < 0) {
		ret = why_set(why, why_len, -errno, "%s: %s", dir, strerror(errno));
		free(j);
		return ret;
	}
	ret = store_open(store_dir, true, &j->store);
	if (ret)
		why_set(why, why_len, ret, "store %s: %s", store_dir, strerror(-ret));
	if (!ret)
		ret = snapstore_disk(p, j, &rw, why, why_len);
	if (!ret)
		ret = snapstore_state(p, j, rw, why, why_len);
	if (!ret)
		ret = snapstore_ram(ss, p, j, why, why_len);
	if (!ret)
		ret = ramstore_put_map(j->store, j->map, &j->doc, why, why_len);
	if (!ret && (ret = store_commit(j->store)))
		why_set(why, why_len, ret, "store %s: %s", store_dir, strerror(-ret));
	if (ret) {
		job_free(j, true);
		return ret;
	}
	*job = j;
	return 0;
}

/* STORE/layouts/<hex>.layout for a digest. */
static void snapstore_layout_path(const struct store *s, const uint8_t d[SHA256_LEN],
				  char *buf, size_t len)
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	snprintf(buf, len, "%s/layouts/%s.layout", store_dir(s), hex);
}

/* Every layer of the image's chain into STORE/layouts/ (the store then holds the disk). */
static int snapstore_copy_chain(struct vm_snapstore_job *j, char *why, size_t why_len)
{
	const struct layout *l = disk_layout(j->disk);
	struct store *s = j->store;
	char path[PATH_MAX];
	uint8_t *data;
	size_t len;
	int ret;

	if (!l)
		return why_set(why, why_len, -EINVAL, "disk: not an image");
	j->doc.disk_size = l->hdr.block_count * DISK_BLOCK;
	snprintf(path, sizeof(path), "%s/layouts", store_dir(s));
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return why_set(why, why_len, -errno, "%s: %s", path, strerror(errno));
	for (unsigned i = 0; i < l->n_layers; i++) {
		snapstore_layout_path(s, l->layers[i].digest, path, sizeof(path));
		if (access(path, F_OK) == 0)
			continue;
		ret = fs_read_fd(l->layers[i].fd, &data, &len);
		if (!ret) {
			ret = fs_write_file_atomic(path, data, len, 0644);
			free(data);
		}
		if (ret)
			return why_set(why, why_len, ret, "%s: %s", path, strerror(-ret));
	}
	return 0;
}

/* The delta committed as a layer over the image, in STORE/layouts/<digest>.layout. */
static int snapstore_commit(struct vm_snapstore_job *j, char *why, size_t why_len)
{
	char base[PATH_MAX], out[PATH_MAX], final[PATH_MAX];
	struct blkd_commit_result cr = { 0 };
	struct blkd_commit_opts o = { .src_path = j->delta, .base_path = base,
				      .store_dir = store_dir(j->store), .out_path = out,
				      .level = 3 };
	int ret;

	snapstore_layout_path(j->store, j->base, base, sizeof(base));
	snprintf(out, sizeof(out), "%s/layouts/.commit.%d.layout", store_dir(j->store),
		 (int)getpid());
	ret = blkd_commit(&o, &cr, why, why_len);
	if (ret)
		return ret;
	snapstore_layout_path(j->store, cr.digest, final, sizeof(final));
	if (rename(out, final) < 0) {
		ret = why_set(why, why_len, -errno, "%s: %s", final, strerror(errno));
		unlink(out);
		return ret;
	}
	memcpy(j->doc.layout, cr.digest, SHA256_LEN);
	j->res.disk_new_chunks = cr.new_chunks;
	return 0;
}

/* The document into STORE/snapshots/<id>.json and DIR/snapshot.json. */
static int snapstore_doc(struct vm_snapstore_job *j, char *why, size_t why_len)
{
	char *json = NULL;
	size_t len = 0;
	int ret = snapdoc_build(&j->doc, &json, &len);

	if (ret)
		return why_set(why, why_len, ret, "snapshot document: %s", strerror(-ret));
	ret = snapfile_write(store_dir(j->store), j->dir, json, len, j->res.id, why, why_len);
	free(json);
	return ret;
}

int vm_snapstore_finish(struct vm_snapstore *ss, struct vm_snapstore_job *j,
			struct vm_snapstore_result *res, char *why, size_t why_len)
{
	int ret = 0;

	j->doc.has_parent = ss->has_parent;
	memcpy(j->doc.parent, ss->parent, SHA256_LEN);
	if (j->has_layout) {
		j->doc.has_disk = true;
		memcpy(j->doc.layout, j->base, SHA256_LEN);
		ret = snapstore_copy_chain(j, why, why_len);
		if (!ret && j->delta[0])
			ret = snapstore_commit(j, why, why_len);
	}
	if (!ret)
		ret = snapstore_doc(j, why, why_len);
	if (ret) {
		/* the next snapshot cannot lean on this one's map: it stores every page */
		rammap_free(ss->map);
		ss->map = NULL;
		free(ss->hashes);
		ss->hashes = NULL;
		ss->has_parent = false;
		job_free(j, true);
		return ret;
	}
	rammap_free(ss->map);
	ss->map = j->map;
	j->map = NULL;
	ss->has_parent = true;
	memcpy(ss->parent, j->res.id, SHA256_LEN);
	*res = j->res;
	job_free(j, false);
	return 0;
}

void vm_snapstore_release(struct vm_snapstore *ss)
{
	rammap_free(ss->map);
	free(ss->hashes);
	*ss = (struct vm_snapstore){ 0 };
}
