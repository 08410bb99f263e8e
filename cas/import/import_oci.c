/* SPDX-License-Identifier: MIT */
/*
 * Import an OCI image layout (oci:DIR[:TAG]): oci-layout, index.json, then a manifest
 * (possibly through nested image indexes, resolved to the --platform asked, else the
 * host's), its config and its layers from DIR/blobs/sha256/. Every blob is checked against
 * its descriptor's size and digest; layers also against the config's diff_ids. The same for
 * a layout held as open files (oci_files.h: docker://, oci-archive:).
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

#include "../../common/esc.h"
#include "../../common/fsutil.h"
#include "import.h"
#include "oci_blob.h"
#include "oci_files.h"

#define OCI_MAX_NESTING 4
#define OCI_REF_NAME "org.opencontainers.image.ref.name"

#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

/* A content descriptor: what a blob is, how big, and its digest. */
struct oci_desc {
	const char *media_type;       /* NULL if absent; points into its JSON object */
	uint8_t digest[SHA256_LEN];
	char hex[SHA256_HEX_LEN + 1];
	uint64_t size;
};

struct oci_image {
	struct import_ctx *ic;
	const char *label;            /* "oci:DIR[:TAG]", prefixes every message */
	char *dir;
	const struct oci_files *files; /* instead of dir */
	const char *tag;              /* NULL: the only image */
	struct oci_platform plat;     /* what an image index is resolved to */
};

static struct json_object *json_array(struct json_object *o, const char *key)
{
	return oci_json_get(o, key, json_type_array);
}

static struct json_object *json_obj(struct json_object *o, const char *key)
{
	return oci_json_get(o, key, json_type_object);
}

/* Parse a descriptor object; `what` names it in messages ("layer 2"). */
static int desc_parse(const struct oci_image *im, struct json_object *o, const char *what,
		      struct oci_desc *d)
{
	struct json_object *size;
	const char *digest;
	char pb[128];

	memset(d, 0, sizeof(*d));
	if (!json_object_is_type(o, json_type_object))
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: %s: descriptor is not a JSON object",
				 im->label, what);
	d->media_type = oci_json_str(o, "mediaType");
	digest = oci_json_str(o, "digest");
	if (!digest)
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: %s: descriptor has no digest", im->label,
				 what);
	if (oci_digest_parse(digest, d->digest))
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: %s: bad digest '%s' (want sha256:<64 lowercase hex>)",
				 im->label, what, esc_str(digest, pb, sizeof(pb)));
	sha256_to_hex(d->digest, d->hex);
	if (!json_object_object_get_ex(o, "size", &size) ||
	    !json_object_is_type(size, json_type_int) || json_object_get_int64(size) < 0)
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: %s sha256:%s: descriptor has no valid size",
				 im->label, what, d->hex);
	d->size = (uint64_t)json_object_get_int64(size);
	return 0;
}

/*
 * A blob of the layout, open. Its digest check reads every byte its descriptor declares, so
 * a sparse file (truncate -s 8T: terabytes declared, nothing stored) would keep the import
 * busy for hours: a blob file with a hole (SEEK_HOLE) is refused before it is read.
 */
static int blob_open(const struct oci_image *im, const struct oci_desc *d, const char *what)
{
	char path[PATH_MAX];
	struct stat st;
	off_t hole;
	int fd, ret;

	if ((size_t)snprintf(path, sizeof(path), "%s/blobs/sha256/%s", im->files ? "" : im->dir,
			     d->hex) >= sizeof(path))
		return why_first(im->ic->why, im->ic->why_len, -ENAMETOOLONG,
				 "%s: %s sha256:%s: path too long",
				 im->label, what, d->hex);
	if (im->files) {
		fd = oci_files_open(im->files, path + 1);
		if (fd >= 0 && fstat(fd, &st)) {
			close(fd);
			fd = -errno;
		}
	} else {
		fd = fs_open_regular(AT_FDCWD, path, 0, &st); /* a FIFO there: refused */
	}
	if (fd < 0) {
		ret = fd;
		return why_first(im->ic->why, im->ic->why_len, ret, "%s: %s sha256:%s: %s",
				 im->label, what, d->hex,
				 ret == -ENOENT ? "blob missing from the layout" :
				 ret == -EINVAL ? "the blob is not a regular file" :
						  strerror(-ret));
	}
	hole = lseek(fd, 0, SEEK_HOLE);
	if (hole >= 0 && hole < st.st_size) {
		close(fd);
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: %s sha256:%s: the blob file is sparse "
				 "(a hole at byte %lld of %lld): a blob is never sparse, refused",
				 im->label, what, d->hex, (long long)hole,
				 (long long)st.st_size);
	}
	return fd;
}

/* Read, verify and parse a JSON object from fd; keeps its text if text != NULL. */
static int fd_json(const struct oci_image *im, int fd, uint64_t size, const uint8_t *digest,
		   const char *label, enum oci_json_kind kind, char **text, size_t *len,
		   struct json_object **obj)
{
	char why[WHY_MAX] = "";
	char *buf;
	size_t n;
	int ret;

	ret = oci_blob_read(im->ic, fd, size, digest, oci_json_limits(kind)->max_bytes, &buf, &n,
			    label);
	if (ret)
		return ret;
	oci_json_parse(buf, n, kind, obj, why, sizeof(why));
	if (!*obj || !json_object_is_type(*obj, json_type_object)) {
		why_first(im->ic->why, im->ic->why_len, -EBADMSG, "%s: %s", label,
			  *obj ? "not a JSON object" : why);
		json_object_put(*obj);
		*obj = NULL;
		free(buf);
		return -EBADMSG;
	}
	if (text) {
		*text = buf;
		*len = n;
	} else {
		free(buf);
	}
	return 0;
}

/* A JSON blob (index, manifest, config): size and digest checked. */
static int blob_json(const struct oci_image *im, const struct oci_desc *d, const char *what,
		     enum oci_json_kind kind, char **text, size_t *len, struct json_object **obj)
{
	char label[PATH_MAX + 256];
	int fd, ret;

	fd = blob_open(im, d, what);
	if (fd < 0)
		return fd;
	snprintf(label, sizeof(label), "%s: %s sha256:%s", im->label, what, d->hex);
	ret = fd_json(im, fd, d->size, d->digest, label, kind, text, len, obj);
	close(fd);
	return ret;
}

/* A file of the layout itself (oci-layout, index.json): no digest to check. */
static int layout_json(const struct oci_image *im, const char *name, struct json_object **obj)
{
	char path[PATH_MAX], label[PATH_MAX + 256];
	struct stat st;
	int fd, ret;

	snprintf(path, sizeof(path), "%s%s%s", im->files ? "" : im->dir, im->files ? "" : "/",
		 name);
	if (im->files)
		fd = oci_files_open(im->files, name);
	else
		fd = fs_open_regular(AT_FDCWD, path, 0, &st); /* a FIFO there: refused */
	if (fd < 0) {
		ret = fd;
		return why_first(im->ic->why, im->ic->why_len, ret, "%s: %s: %s", im->label, path,
				 ret == -ENOENT ? "missing (not an OCI image layout)" :
				 ret == -EINVAL ? "not a regular file" : strerror(-ret));
	}
	snprintf(label, sizeof(label), "%s: %s", im->label, name);
	ret = fd_json(im, fd, OCI_SIZE_UNKNOWN, NULL, label, OCI_JSON_INDEX, NULL, NULL, obj);
	close(fd);
	return ret;
}

static int check_layout_version(const struct oci_image *im)
{
	struct json_object *o;
	const char *v;
	char pb[64];
	int ret;

	ret = layout_json(im, "oci-layout", &o);
	if (ret)
		return ret;
	v = oci_json_str(o, "imageLayoutVersion");
	if (!v)
		ret = why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				"%s: oci-layout: no imageLayoutVersion",
				im->label);
	else if (strcmp(v, "1.0.0") && strncmp(v, "1.", 2))
		ret = why_first(im->ic->why, im->ic->why_len, -ENOTSUP,
				"%s: oci-layout: unsupported imageLayoutVersion '%s' (want 1.x)",
				im->label, esc_str(v, pb, sizeof(pb)));
	json_object_put(o);
	return ret;
}

static const char *ref_name(struct json_object *desc)
{
	return oci_json_str(json_obj(desc, "annotations"), OCI_REF_NAME);
}

/* "a, b, (untagged)" for messages. */
static const char *list_tags(struct json_object *list, char *buf, size_t len)
{
	size_t n = json_object_array_length(list), used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < n && used < len; i++) {
		const char *t = ref_name(json_object_array_get_idx(list, i));
		char pb[128];
		int w;

		w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
			     t ? esc_str(t, pb, sizeof(pb)) : "(untagged)");
		used += w > 0 ? (size_t)w : 0;
	}
	return buf;
}

/* From an index's manifests: the one for the platform asked (or the host's). */
static struct json_object *pick_platform(const struct oci_image *im, struct json_object *list,
					 const char *what)
{
	struct json_object *pick = oci_platform_pick(list, &im->plat);
	char buf[512], pb[100];

	if (pick)
		return pick;
	if (json_object_array_length(list) == 0)
		why_first(im->ic->why, im->ic->why_len, -ENOENT, "%s: %s lists no images",
			  im->label, what);
	else
		why_first(im->ic->why, im->ic->why_len, -ENOENT,
			  "%s: %s has no %s image (platforms: %s)", im->label,
			  what, oci_platform_str(&im->plat, pb, sizeof(pb)),
			  oci_platform_list(list, buf, sizeof(buf)));
	return NULL;
}

/* The descriptor index.json names for the wanted tag (or the only image). */
static int pick_top(const struct oci_image *im, struct json_object *index, struct oci_desc *d,
		    struct json_object **keep)
{
	struct json_object *list = json_array(index, "manifests"), *pick = NULL, *cand;
	size_t n;
	char buf[1024];
	bool tagged = false;

	if (!list)
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: index.json: no \"manifests\" array",
				 im->label);
	n = json_object_array_length(list);
	if (n == 0)
		return why_first(im->ic->why, im->ic->why_len, -ENOENT,
				 "%s: index.json lists no images", im->label);
	for (size_t i = 0; i < n; i++)
		tagged |= ref_name(json_object_array_get_idx(list, i)) != NULL;
	if (!im->tag) {
		if (n == 1) {
			pick = json_object_array_get_idx(list, 0);
		} else if (tagged) {
			return why_first(im->ic->why, im->ic->why_len, -EINVAL,
					 "%s: %zu images in index.json, name one "
					 "with oci:DIR:TAG (tags: %s)", im->label, n,
					 list_tags(list, buf, sizeof(buf)));
		} else {
			pick = pick_platform(im, list, "index.json");
			if (!pick)
				return -ENOENT;
		}
		return desc_parse(im, pick, "image", d);
	}
	cand = json_object_new_array();
	if (!cand)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct json_object *e = json_object_array_get_idx(list, i);
		const char *t = ref_name(e);

		if (t && !strcmp(t, im->tag))
			json_object_array_add(cand, json_object_get(e));
	}
	if (json_object_array_length(cand) == 0) {
		char pb[128];

		why_first(im->ic->why, im->ic->why_len, -ENOENT,
			  "%s: no image tagged '%s' in index.json (tags: %s)",
			  im->label, esc_str(im->tag, pb, sizeof(pb)),
			  list_tags(list, buf, sizeof(buf)));
		json_object_put(cand);
		return -ENOENT;
	}
	pick = pick_platform(im, cand, "index.json");
	if (!pick) {
		json_object_put(cand);
		return -ENOENT;
	}
	*keep = cand; /* d->media_type points into it */
	return desc_parse(im, pick, "image", d);
}

static bool is_index_type(const char *mt)
{
	return mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST));
}

static bool is_manifest_type(const char *mt)
{
	return mt && (!strcmp(mt, MT_OCI_MANIFEST) || !strcmp(mt, MT_DOCKER_MANIFEST));
}

struct oci_layer {
	struct oci_desc desc;
	enum oci_compression comp;
};

/* Check every layer descriptor before any layer is applied. */
static int parse_layers(const struct oci_image *im, struct json_object *layers,
			struct oci_layer *out)
{
	size_t n = json_object_array_length(layers);
	char what[64], pb[160];
	int ret;

	for (size_t i = 0; i < n; i++) {
		struct oci_layer *l = &out[i];

		snprintf(what, sizeof(what), "layer %zu", i + 1);
		ret = desc_parse(im, json_object_array_get_idx(layers, i), what, &l->desc);
		if (ret)
			return ret;
		if (oci_layer_media_type(l->desc.media_type, &l->comp))
			return why_first(im->ic->why, im->ic->why_len, -ENOTSUP,
					 "%s: %s sha256:%s: unknown layer media type %s",
					 im->label, what, l->desc.hex,
					 l->desc.media_type ? esc_str(l->desc.media_type,
									    pb, sizeof(pb))
							    : "(none)");
	}
	return 0;
}

static int apply_layers(const struct oci_image *im, const struct oci_layer *layers, size_t n,
			uint8_t (*diff_ids)[SHA256_LEN])
{
	char what[PATH_MAX + 256];
	int ret = 0;

	for (size_t i = 0; i < n && !ret; i++) {
		const struct oci_layer *l = &layers[i];
		struct oci_layer_src src = {
			.size = l->desc.size,
			.digest = l->desc.digest,
			.diff_id = diff_ids ? diff_ids[i] : NULL,
			.comp = l->comp,
		};

		snprintf(what, sizeof(what), "layer %zu", i + 1);
		src.fd = blob_open(im, &l->desc, what);
		if (src.fd < 0)
			return src.fd;
		snprintf(what, sizeof(what), "%s: layer %zu sha256:%s", im->label, i + 1,
			 l->desc.hex);
		ret = oci_layer_apply(im->ic, &src, (uint32_t)(i + 1), what);
		close(src.fd);
	}
	return ret;
}

/* An image manifest m (blob md): read its config, check its layers, apply them. */
static int import_manifest(const struct oci_image *im, const struct oci_desc *md,
			   struct json_object *m)
{
	struct json_object *cfg = NULL, *layers = json_array(m, "layers"), *sv;
	uint8_t (*diff_ids)[SHA256_LEN] = NULL;
	struct oci_layer *ls = NULL;
	struct oci_desc cd;
	char *ctext = NULL;
	size_t clen = 0, n;
	bool have_diffs = false;
	int ret;

	if (json_object_object_get_ex(m, "schemaVersion", &sv) &&
	    (!json_object_is_type(sv, json_type_int) || json_object_get_int(sv) != 2))
		return why_first(im->ic->why, im->ic->why_len, -ENOTSUP,
				 "%s: manifest sha256:%s: schemaVersion is "
				 "not 2", im->label, md->hex);
	if (!layers || !json_obj(m, "config"))
		return why_first(im->ic->why, im->ic->why_len, -EBADMSG,
				 "%s: manifest sha256:%s: not an image "
				 "manifest (no config or layers)", im->label, md->hex);
	ret = desc_parse(im, json_obj(m, "config"), "config", &cd);
	if (!ret)
		ret = blob_json(im, &cd, "config", OCI_JSON_CONFIG, &ctext, &clen, &cfg);
	if (ret)
		return ret;
	n = json_object_array_length(layers);
	ls = calloc(n ? n : 1, sizeof(*ls));
	diff_ids = calloc(n ? n : 1, sizeof(*diff_ids));
	if (!ls || !diff_ids) {
		ret = -ENOMEM;
		goto out;
	}
	ret = oci_config_diff_ids(im->ic, cfg, n, diff_ids, &have_diffs, im->label);
	if (!ret)
		ret = parse_layers(im, layers, ls);
	if (!ret)
		ret = apply_layers(im, ls, n, have_diffs ? diff_ids : NULL);
	if (!ret) {
		free(im->ic->config_json);
		im->ic->config_json = ctext;
		im->ic->config_len = clen;
		ctext = NULL;
	}
out:
	free(diff_ids);
	free(ls);
	free(ctext);
	json_object_put(cfg);
	return ret;
}

/*
 * Follow image indexes from the chosen descriptor down to one image manifest. A
 * descriptor without a media type is taken for what its blob looks like.
 */
static int resolve(const struct oci_image *im, struct oci_desc *d, struct json_object *keep)
{
	struct json_object *held = keep; /* d points into it */
	int ret = 0;

	for (int depth = 0;; depth++) {
		bool index = is_index_type(d->media_type);
		struct json_object *blob = NULL, *pick;
		char what[96], pb[160];

		if (d->media_type && !index && !is_manifest_type(d->media_type)) {
			ret = why_first(im->ic->why, im->ic->why_len, -ENOTSUP,
					"%s: image sha256:%s: unknown manifest "
					"media type %s", im->label, d->hex,
					esc_str(d->media_type, pb, sizeof(pb)));
			break;
		}
		if (depth > OCI_MAX_NESTING) {
			ret = why_first(im->ic->why, im->ic->why_len, -ELOOP,
					"%s: image indexes nested more than %d deep",
					im->label, OCI_MAX_NESTING);
			break;
		}
		ret = blob_json(im, d, index ? "index" : "manifest",
				index ? OCI_JSON_INDEX : OCI_JSON_MANIFEST, NULL, NULL, &blob);
		if (ret)
			break;
		if (!d->media_type)
			index = json_array(blob, "manifests") && !json_array(blob, "layers");
		if (!index) {
			ret = import_manifest(im, d, blob);
			json_object_put(blob);
			break;
		}
		snprintf(what, sizeof(what), "index sha256:%s", d->hex);
		if (!json_array(blob, "manifests")) {
			ret = why_first(im->ic->why, im->ic->why_len, -EBADMSG,
					"%s: %s: no \"manifests\" array",
					im->label, what);
			json_object_put(blob);
			break;
		}
		pick = pick_platform(im, json_array(blob, "manifests"), what);
		ret = pick ? desc_parse(im, pick, "image", d) : -ENOENT;
		json_object_put(held);
		held = blob;
		if (ret)
			break;
	}
	json_object_put(held);
	return ret;
}

/*
 * "DIR[:TAG]": DIR may itself contain ':' (and a ref name may too), so the split is at
 * the first ':' whose left side is a directory; the whole spec wins if it is one.
 */
static int split_spec(struct oci_image *im, const char *spec)
{
	struct stat st;
	const char *c;

	if (stat(spec, &st) == 0 && S_ISDIR(st.st_mode)) {
		im->dir = strdup(spec);
		return im->dir ? 0 : -ENOMEM;
	}
	for (c = strchr(spec, ':'); c; c = strchr(c + 1, ':')) {
		char *dir = strndup(spec, (size_t)(c - spec));

		if (!dir)
			return -ENOMEM;
		if (stat(dir, &st) == 0 && S_ISDIR(st.st_mode)) {
			im->dir = dir;
			im->tag = c[1] ? c + 1 : NULL;
			return 0;
		}
		free(dir);
	}
	return why_first(im->ic->why, im->ic->why_len, -ENOENT, "%s: no such directory", im->label);
}

/* From the layout's top to the image: the checks and the descent shared by both forms. */
static int import_layout(struct oci_image *im)
{
	struct json_object *index = NULL, *keep = NULL;
	const char *p = im->ic->o ? im->ic->o->platform : NULL;
	struct oci_desc d;
	int ret;

	if (oci_platform_parse(p, &im->plat))
		return why_first(im->ic->why, im->ic->why_len, -EINVAL,
				 "bad platform '%s' (want os/arch[/variant])",
				 p ? p : "(host)");
	ret = check_layout_version(im);
	if (!ret)
		ret = layout_json(im, "index.json", &index);
	if (!ret)
		ret = pick_top(im, index, &d, &keep);
	if (!ret) {
		ret = resolve(im, &d, keep); /* takes keep */
	} else {
		json_object_put(keep);
	}
	json_object_put(index); /* import_run reports -ENOMEM */
	return ret;
}

int import_oci_files(struct import_ctx *ic, const struct oci_files *f, const char *tag)
{
	struct oci_image im = { .ic = ic, .label = ic->src_label, .files = f, .tag = tag };

	if (!im.label)
		im.label = "oci";
	return import_layout(&im);
}

int import_oci(struct import_ctx *ic, const char *spec)
{
	struct oci_image im = { .ic = ic, .label = ic->src_label };
	char label[PATH_MAX];
	int ret;

	if (!im.label) {
		snprintf(label, sizeof(label), "oci:%s", spec);
		im.label = label;
	}
	ret = split_spec(&im, spec);
	if (!ret)
		ret = import_layout(&im);
	free(im.dir);
	return ret;
}
