/* SPDX-License-Identifier: MIT */
/*
 * Import a docker-archive tarball (docker save, skopeo docker-archive:):
 *
 *   manifest.json  [{"Config":"<hex>.json","RepoTags":["name:tag"],"Layers":["x/layer.tar"]}]
 *
 * The outer tar is read twice. Pass 1 lists its members (with symlinks and hardlinks
 * between them, which docker save and skopeo use for shared layers) and keeps
 * manifest.json. Pass 2 copies the members the chosen image needs (config and layers)
 * into unlinked temporary files under $TMPDIR, since layers are applied in manifest order,
 * not archive order. A member named by a digest ("<hex>.tar", "blobs/sha256/<hex>",
 * "sha256:<hex>") is verified against it; layers also against the config's diff_ids.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <json-c/json.h>

#include "../../common/dl_archive.h"
#include "../../common/esc.h"
#include "../../common/grow.h"
#include "../../common/fsutil.h"
#include "import.h"
#include "oci_blob.h"

#define DA_MAX_LINK_HOPS 16

struct da_member {
	char *name;                   /* normalized path; NULL if unusable */
	char *link;                   /* normalized target of a symlink or hardlink */
	bool reg;
	int fd;                       /* extracted copy, or -1 */
	bool needed;
};

struct da {
	struct import_ctx *ic;
	const char *label;            /* "docker-archive:FILE[:REF]" */
	char *file;
	int fd;                       /* file, a regular file (it is read twice) */
	uint64_t file_size;
	const char *ref;              /* RepoTag to pick, or NULL: the first image */
	struct da_member *m;          /* every archive entry, in archive order */
	size_t n, cap;
	char *manifest;               /* manifest.json */
	size_t manifest_len;
};

/* Open the outer tar (a stream: docker save output may also be compressed). */
static int da_open(struct da *da, struct archive **out)
{
	struct archive *a;

	if (dl_archive_load())
		return -ELIBACC;
	a = sym_archive_read_new();
	if (!a)
		return -ENOMEM; /* import_run reports it */
	sym_archive_read_support_format_tar(a);
	sym_archive_read_support_filter_gzip(a);
	sym_archive_read_support_filter_zstd(a);
	sym_archive_read_support_filter_xz(a);
	sym_archive_read_support_filter_bzip2(a);
	if (lseek(da->fd, 0, SEEK_SET) != 0 ||
	    sym_archive_read_open_fd(a, da->fd, 1 << 20) != ARCHIVE_OK) {
		const char *msg = sym_archive_error_string(a);

		why_first(da->ic->why, da->ic->why_len, -EIO, "%s: %s", da->label,
			  msg ? msg : "cannot open");
		sym_archive_read_free(a);
		return -EIO;
	}
	*out = a;
	return 0;
}

static int da_next(struct da *da, struct archive *a, struct archive_entry **e)
{
	int r = sym_archive_read_next_header(a, e);

	if (r == ARCHIVE_EOF)
		return 1;
	if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
		const char *msg = sym_archive_error_string(a);

		return why_first(da->ic->why, da->ic->why_len, -EIO, "%s: %s", da->label,
				 msg ? msg : "corrupt archive");
	}
	return 0;
}

/* The current member (manifest.json) into a malloc'ed NUL-terminated buffer. */
static int read_member(struct da *da, struct archive *a, const char *name, char **out,
		       size_t *len)
{
	size_t fill = 0, cap = 0;
	char *buf = NULL;

	for (;;) {
		la_ssize_t r;

		if (cap - fill < 2) {
			/* the next capacity, 2 * cap (65536 first), over the limit */
			if (cap > ((size_t)OCI_JSON_MAX + 2) / 2) {
				free(buf);
				return why_first(da->ic->why, da->ic->why_len, -EFBIG,
						 "%s: %s: larger than %u bytes",
						 da->label, name, OCI_JSON_MAX);
			}
			if (!grow_from((void **)&buf, &cap, fill + 2, 1, 65536)) {
				free(buf);
				return -ENOMEM;
			}
		}
		r = sym_archive_read_data(a, buf + fill, cap - fill - 1);
		if (r < 0) {
			free(buf);
			return why_first(da->ic->why, da->ic->why_len, -EIO, "%s: %s: %s",
					 da->label, name,
					 sym_archive_error_string(a));
		}
		if (r == 0)
			break;
		fill += (size_t)r;
	}
	buf[fill] = '\0';
	free(*out);
	*out = buf;
	*len = fill;
	return 0;
}

/* A link to target (relative to directory base); an unusable target leaves no link. */
static int set_link(struct da_member *m, const char *base, const char *target)
{
	char path[PATH_MAX];

	if (!target || oci_path_normalize(base, target, path, sizeof(path)))
		return 0;
	m->link = strdup(path);
	return m->link ? 0 : -ENOMEM;
}

/*
 * A member of an uncompressed archive that declares more data than the whole archive
 * holds (and is not sparse: a sparse one is refused where it is used, see copy_member)
 * is refused before anything reads it.
 */
static int member_size_check(struct da *da, struct archive *a, struct archive_entry *e,
			     const char *name)
{
	la_int64_t size = sym_archive_entry_size(e);

	if (sym_archive_filter_code(a, 0) != ARCHIVE_FILTER_NONE ||
	    sym_archive_entry_sparse_count(e) > 0 || size <= 0 ||
	    (uint64_t)size <= da->file_size)
		return 0;
	return why_first(da->ic->why, da->ic->why_len, -EBADMSG,
			 "%s: %s: declares %lld bytes, more than the "
			 "whole archive (%llu bytes)", da->label, name, (long long)size,
			 (unsigned long long)da->file_size);
}

/* Pass 1: every member's name and links; keep manifest.json. */
static int da_scan(struct da *da)
{
	struct archive *a = NULL;
	struct archive_entry *e;
	char path[PATH_MAX], dir[PATH_MAX];
	int ret = da_open(da, &a);

	if (ret)
		return ret;
	while (!(ret = da_next(da, a, &e))) {
		const char *name = sym_archive_entry_pathname(e);
		const char *hl = sym_archive_entry_hardlink(e);
		struct da_member *m;

		if (!grow((void **)&da->m, &da->cap, da->n + 1, sizeof(*da->m))) {
			ret = -ENOMEM;
			break;
		}
		m = &da->m[da->n++];
		memset(m, 0, sizeof(*m));
		m->fd = -1;
		if (!name || oci_path_normalize(NULL, name, path, sizeof(path)))
			continue; /* never referenced by a usable manifest */
		m->name = strdup(path);
		if (!m->name) {
			ret = -ENOMEM;
			break;
		}
		if (hl) {
			ret = set_link(m, NULL, hl);
		} else if (sym_archive_entry_filetype(e) == AE_IFLNK) {
			char *slash;

			snprintf(dir, sizeof(dir), "%s", m->name);
			slash = strrchr(dir, '/');
			if (slash)
				*slash = '\0';
			else
				dir[0] = '\0';
			ret = set_link(m, dir, sym_archive_entry_symlink(e));
		} else if (sym_archive_entry_filetype(e) == AE_IFREG) {
			m->reg = true;
			ret = member_size_check(da, a, e, m->name);
			if (ret)
				break;
			if (!strcmp(m->name, "manifest.json"))
				ret = read_member(da, a, m->name, &da->manifest, &da->manifest_len);
		}
		if (ret)
			break;
	}
	sym_archive_read_free(a);
	return ret < 0 ? ret : 0;
}

/* The regular member that name leads to (through links), or NULL with why. */
static struct da_member *da_lookup(struct da *da, const char *name, char *why, size_t why_len)
{
	for (int hop = 0; hop < DA_MAX_LINK_HOPS; hop++) {
		struct da_member *m = NULL;

		for (size_t i = da->n; i-- > 0;) {
			if (da->m[i].name && !strcmp(da->m[i].name, name)) {
				m = &da->m[i];
				break;
			}
		}
		if (!m) {
			why_set(why, why_len, 0, "not in the archive");
			return NULL;
		}
		if (m->reg)
			return m;
		if (!m->link) {
			why_set(why, why_len, 0, "not a regular file");
			return NULL;
		}
		name = m->link;
	}
	why_set(why, why_len, 0, "too many levels of links");
	return NULL;
}

static int da_tmpfile(struct da *da)
{
	const char *dir = getenv("TMPDIR");
	char path[PATH_MAX];
	int fd;

	if (!dir || !*dir)
		dir = "/tmp";
	snprintf(path, sizeof(path), "%s/lazyblk-docker-archive.XXXXXX", dir);
	fd = mkostemp(path, O_CLOEXEC);
	if (fd < 0) {
		int err = errno;

		return why_first(da->ic->why, da->ic->why_len, -err,
				 "%s: cannot create a temporary file in %s: %s",
				 da->label, dir, strerror(err));
	}
	unlink(path); /* the copy lives only as long as the descriptor */
	return fd;
}

#define SPARSE_MEMBER "a sparse member (GNU or PAX sparse file) where a blob is expected"

/*
 * A config or layer member into a temporary copy. A blob is never sparse: a sparse member
 * could declare terabytes of holes in a few kilobytes (and the layer's digest check reads
 * every declared byte), so it is refused, from its sparse map before reading, and from
 * the data it really holds (less than its size) after.
 */
static int copy_member(struct da *da, struct archive *a, struct archive_entry *e,
		       struct da_member *m)
{
	la_int64_t size = sym_archive_entry_size(e);
	uint64_t copied = 0;
	int fd;

	if (sym_archive_entry_sparse_count(e) > 0)
		return why_first(da->ic->why, da->ic->why_len, -EBADMSG, "%s: %s: %s", da->label,
				 m->name,
				 SPARSE_MEMBER);
	fd = da_tmpfile(da);
	if (fd < 0)
		return fd;
	m->fd = fd;
	for (;;) {
		const void *buf;
		size_t len;
		la_int64_t off;
		int r = sym_archive_read_data_block(a, &buf, &len, &off);

		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
			const char *msg = sym_archive_error_string(a);

			return why_first(da->ic->why, da->ic->why_len, -EIO, "%s: %s: %s",
					 da->label, m->name,
					 msg ? msg : "read error");
		}
		while (len) {
			ssize_t w = pwrite(fd, buf, len, (off_t)off);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				int err = w < 0 ? errno : ENOSPC;

				return why_first(da->ic->why, da->ic->why_len, -err,
						 "%s: %s: writing a temporary "
						 "copy: %s", da->label, m->name, strerror(err));
			}
			buf = (const uint8_t *)buf + w;
			len -= (size_t)w;
			off += w;
			copied += (uint64_t)w;
		}
	}
	if (size > 0 && copied < (uint64_t)size)
		return why_first(da->ic->why, da->ic->why_len, -EBADMSG, "%s: %s: %s", da->label,
				 m->name,
				 SPARSE_MEMBER);
	return 0;
}

/* Pass 2: copy out the members marked needed. */
static int da_extract(struct da *da)
{
	struct archive *a = NULL;
	struct archive_entry *e;
	size_t i = 0;
	int ret = da_open(da, &a);

	if (ret)
		return ret;
	while (!(ret = da_next(da, a, &e))) {
		struct da_member *m = i < da->n ? &da->m[i] : NULL;
		const char *name = sym_archive_entry_pathname(e);
		char path[PATH_MAX];

		i++;
		if (!m || !m->needed)
			continue;
		if (!name || oci_path_normalize(NULL, name, path, sizeof(path)) ||
		    strcmp(path, m->name)) {
			ret = why_first(da->ic->why, da->ic->why_len, -EIO,
					"%s: the archive changed while being read",
					da->label);
			break;
		}
		ret = copy_member(da, a, e, m);
		if (ret)
			break;
	}
	sym_archive_read_free(a);
	if (ret < 0)
		return ret;
	for (i = 0; i < da->n; i++) {
		if (da->m[i].needed && da->m[i].fd < 0)
			return why_first(da->ic->why, da->ic->why_len, -EIO,
					 "%s: the archive changed while being read",
					 da->label);
	}
	return 0;
}

/* A member named by its digest: "<hex>.tar", "<hex>.json", "blobs/sha256/<hex>", ... */
static bool name_digest(const char *name, uint8_t d[SHA256_LEN])
{
	const char *base = strrchr(name, '/');
	char buf[SHA256_HEX_LEN + 8] = "sha256:";
	size_t len;

	base = base ? base + 1 : name;
	if (!strncmp(base, "sha256:", 7))
		base += 7;
	len = strcspn(base, ".");
	if (len != SHA256_HEX_LEN || (base[len] && strcmp(base + len, ".tar") &&
				      strcmp(base + len, ".json") &&
				      strcmp(base + len, ".tar.gz")))
		return false;
	memcpy(buf + 7, base, SHA256_HEX_LEN);
	buf[7 + SHA256_HEX_LEN] = '\0';
	return oci_digest_parse(buf, d) == 0;
}

static bool repo_tag_matches(const char *tag, const char *ref)
{
	static const char *const prefixes[] = { "", "docker.io/", "docker.io/library/" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		size_t pl = strlen(prefixes[i]);

		if (!strncmp(tag, prefixes[i], pl) && !strcmp(tag + pl, ref))
			return true;
	}
	return false;
}

static struct json_object *pick_image(struct da *da, struct json_object *list)
{
	size_t n = json_object_array_length(list);
	char pb[128];

	if (n == 0) {
		why_first(da->ic->why, da->ic->why_len, -ENOENT,
			  "%s: manifest.json lists no images", da->label);
		return NULL;
	}
	if (!da->ref)
		return json_object_array_get_idx(list, 0);
	for (size_t i = 0; i < n; i++) {
		struct json_object *img = json_object_array_get_idx(list, i);
		struct json_object *tags = oci_json_get(img, "RepoTags", json_type_array);

		for (size_t k = 0; tags && k < json_object_array_length(tags); k++) {
			struct json_object *t = json_object_array_get_idx(tags, k);

			if (json_object_is_type(t, json_type_string) &&
			    repo_tag_matches(json_object_get_string(t), da->ref))
				return img;
		}
	}
	why_first(da->ic->why, da->ic->why_len, -ENOENT,
		  "%s: no image tagged '%s' in manifest.json", da->label,
		  esc_str(da->ref, pb, sizeof(pb)));
	return NULL;
}

struct da_layer {
	const char *ref;              /* as manifest.json names it */
	struct da_member *m;
	uint8_t digest[SHA256_LEN];
	bool has_digest;
};

/* The image picked from manifest.json: its config and layers, as archive members. */
struct da_image {
	struct json_object *list;     /* parsed manifest.json; the refs point into it */
	const char *cref;
	struct da_member *cm;
	struct da_layer *ls;
	uint8_t (*diff_ids)[SHA256_LEN];
	size_t n;
};

/* The member manifest.json calls `ref`, marked for extraction. */
static struct da_member *need(struct da *da, const char *ref, const char *what)
{
	char path[PATH_MAX], pb[160];
	char why[WHY_MAX] = "bad path";
	struct da_member *m = NULL;

	if (ref[0] != '/' && !oci_path_normalize(NULL, ref, path, sizeof(path)))
		m = da_lookup(da, path, why, sizeof(why));
	if (!m) {
		why_first(da->ic->why, da->ic->why_len, -ENOENT, "%s: %s %s: %s", da->label, what,
			  esc_str(ref, pb, sizeof(pb)), why);
		return NULL;
	}
	m->needed = true;
	return m;
}

static bool member_digest(const struct da_member *m, const char *ref, uint8_t d[SHA256_LEN])
{
	return name_digest(m->name, d) || name_digest(ref, d);
}

/* manifest.json → the chosen image's members, marked needed. */
static int da_parse_manifest(struct da *da, struct da_image *im)
{
	struct json_object *img, *layers;
	char why[WHY_MAX] = "";
	char what[32];

	oci_json_parse(da->manifest, da->manifest_len, OCI_JSON_DOCKER, &im->list, why,
		       sizeof(why));
	if (!im->list || !json_object_is_type(im->list, json_type_array))
		return why_first(da->ic->why, da->ic->why_len, -EBADMSG, "%s: manifest.json: %s",
				 da->label,
				 im->list ? "not a JSON array" : why);
	img = pick_image(da, im->list);
	if (!img)
		return -ENOENT;
	im->cref = oci_json_str(img, "Config");
	layers = oci_json_get(img, "Layers", json_type_array);
	if (!im->cref || !layers)
		return why_first(da->ic->why, da->ic->why_len, -EBADMSG,
				 "%s: manifest.json: image has no %s",
				 da->label, im->cref ? "Layers" : "Config");
	im->n = json_object_array_length(layers);
	im->ls = calloc(im->n ? im->n : 1, sizeof(*im->ls));
	im->diff_ids = calloc(im->n ? im->n : 1, sizeof(*im->diff_ids));
	if (!im->ls || !im->diff_ids)
		return -ENOMEM;
	im->cm = need(da, im->cref, "config");
	if (!im->cm)
		return -ENOENT;
	for (size_t i = 0; i < im->n; i++) {
		struct da_layer *l = &im->ls[i];

		snprintf(what, sizeof(what), "layer %zu", i + 1);
		l->ref = json_object_get_string(json_object_array_get_idx(layers, i));
		if (!json_object_is_type(json_object_array_get_idx(layers, i), json_type_string))
			return why_first(da->ic->why, da->ic->why_len, -EBADMSG,
					 "%s: manifest.json: %s is not a path",
					 da->label, what);
		l->m = need(da, l->ref, what);
		if (!l->m)
			return -ENOENT;
		l->has_digest = member_digest(l->m, l->ref, l->digest);
	}
	return 0;
}

static int da_import(struct da *da)
{
	struct da_image im = { 0 };
	struct json_object *cfg = NULL;
	char why[WHY_MAX] = "";
	char what[PATH_MAX + 128], pb[160], *ctext = NULL;
	uint8_t cdigest[SHA256_LEN];
	size_t clen = 0;
	bool have_diffs = false;
	int ret;

	ret = da_parse_manifest(da, &im);
	if (!ret)
		ret = da_extract(da);
	if (ret)
		goto out;
	snprintf(what, sizeof(what), "%s: config %s", da->label,
		 esc_str(im.cref, pb, sizeof(pb)));
	ret = oci_blob_read(da->ic, im.cm->fd, OCI_SIZE_UNKNOWN,
			    member_digest(im.cm, im.cref, cdigest) ? cdigest : NULL, OCI_JSON_CONFIG_MAX,
			    &ctext, &clen, what);
	if (ret)
		goto out;
	oci_json_parse(ctext, clen, OCI_JSON_CONFIG, &cfg, why, sizeof(why));
	if (!cfg || !json_object_is_type(cfg, json_type_object)) {
		ret = why_first(da->ic->why, da->ic->why_len, -EBADMSG, "%s: %s", what,
				cfg ? "not a JSON object" : why);
		goto out;
	}
	ret = oci_config_diff_ids(da->ic, cfg, im.n, im.diff_ids, &have_diffs, da->label);
	for (size_t i = 0; !ret && i < im.n; i++) {
		struct da_layer *l = &im.ls[i];
		struct oci_layer_src src = {
			.fd = l->m->fd,
			.size = OCI_SIZE_UNKNOWN,
			.digest = l->has_digest ? l->digest : NULL,
			.diff_id = have_diffs ? im.diff_ids[i] : NULL,
			.comp = OCI_COMP_DETECT,
		};

		snprintf(what, sizeof(what), "%s: layer %zu %s", da->label, i + 1,
			 esc_str(l->ref, pb, sizeof(pb)));
		ret = oci_layer_apply(da->ic, &src, (uint32_t)(i + 1), what);
	}
	if (!ret) {
		free(da->ic->config_json);
		da->ic->config_json = ctext;
		da->ic->config_len = clen;
		ctext = NULL;
	}
out:
	free(ctext);
	free(im.diff_ids);
	free(im.ls);
	json_object_put(cfg);
	json_object_put(im.list);
	return ret;
}

/* "FILE[:REF]": the whole spec wins if it is a file, else the first ':' that leaves one. */
static int da_split(struct da *da, const char *spec)
{
	struct stat st;
	int err;

	if (stat(spec, &st) == 0) {
		da->file = strdup(spec);
		return da->file ? 0 : -ENOMEM;
	}
	err = errno;
	for (const char *c = strchr(spec, ':'); c; c = strchr(c + 1, ':')) {
		char *file = strndup(spec, (size_t)(c - spec));

		if (!file)
			return -ENOMEM;
		if (stat(file, &st) == 0 && S_ISREG(st.st_mode)) {
			da->file = file;
			da->ref = c[1] ? c + 1 : NULL;
			return 0;
		}
		free(file);
	}
	return why_first(da->ic->why, da->ic->why_len, -err, "%s: %s", da->label, strerror(err));
}

/* The archive, opened once for both passes: a FIFO or a device is refused, not read. */
static int da_open_file(struct da *da)
{
	struct stat st;

	da->fd = fs_open_regular(AT_FDCWD, da->file, 0, &st);
	if (da->fd < 0)
		return why_first(da->ic->why, da->ic->why_len, da->fd, "%s: %s", da->label,
				 da->fd == -EINVAL ? "not a regular file (a docker-archive is "
				 "read twice: it cannot come from a pipe)" : strerror(-da->fd));
	da->file_size = (uint64_t)st.st_size;
	return 0;
}

int import_docker_archive(struct import_ctx *ic, const char *spec)
{
	struct da da = { .ic = ic, .label = ic->src_label, .fd = -1 };
	char label[PATH_MAX];
	int ret;

	if (!da.label) {
		snprintf(label, sizeof(label), "docker-archive:%s", spec);
		da.label = label;
	}
	ret = da_split(&da, spec);
	if (!ret)
		ret = da_open_file(&da);
	if (!ret)
		ret = da_scan(&da);
	if (!ret && !da.manifest)
		ret = why_first(ic->why, ic->why_len, -ENOENT,
				"%s: no manifest.json in the archive (not a "
				"docker-archive tarball)", da.label);
	if (!ret)
		ret = da_import(&da);
	for (size_t i = 0; i < da.n; i++) {
		if (da.m[i].fd >= 0)
			close(da.m[i].fd);
		free(da.m[i].name);
		free(da.m[i].link);
	}
	free(da.m);
	free(da.manifest);
	free(da.file);
	if (da.fd >= 0)
		close(da.fd);
	return ret;
}
