/* SPDX-License-Identifier: MIT */
/*
 * Import an image from a registry (docker://HOST[:PORT]/REPO[:TAG|@DIGEST]): its manifest by
 * tag or digest (an image index resolved to the platform asked, else the host's), then its
 * config and layers fetched in parallel (PULL_PARALLEL at a time), each hashed as it arrives
 * into a staging file in STORE/tmp (oci_files.h), then the whole imported by the oci: path
 * from those files, which checks every blob again and applies the layers in order.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../../common/esc.h"
#include "../../common/why.h"
#include "../oci_json.h"
#include "../remote/registry.h"
#include "../remote/remote.h"
#include "import.h"
#include "oci_files.h"

#define PULL_PARALLEL 4
#define PULL_MAX_NESTING 4
#define PULL_MAX_BLOBS 4096

#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"

struct pull_blob {
	uint8_t digest[SHA256_LEN];
	uint64_t size;
	int fd;
};

struct pull {
	struct import_ctx *ic;
	const char *label;           /* "docker://…" */
	char *host, *repo, *tag;     /* tag: a tag or "sha256:<hex>" */
	bool by_digest;
	struct remote *r;
	struct oci_files files;
	struct pull_blob *blobs;
	size_t n_blobs;
	/* the fetch */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	size_t next;
	unsigned running;
	int stop;                    /* atomic: a fetch failed, or the import is cancelled */
	int err;
	char why[1024];
	uint64_t fetched, total;
};

/* "HOST[:PORT]/REPO[:TAG|@sha256:HEX]" */
static int ref_parse(struct pull *pl, const char *ref)
{
	const char *slash = strchr(ref, '/'), *at, *colon;
	uint8_t d[SHA256_LEN];

	if (!slash || slash == ref || !slash[1])
		return why_first(pl->ic->why, pl->ic->why_len, -EINVAL,
				 "%s: want docker://HOST[:PORT]/REPO[:TAG|"
				 "@sha256:DIGEST] (the registry's host is required)", pl->label);
	pl->host = strndup(ref, (size_t)(slash - ref));
	at = strchr(slash, '@');
	colon = strrchr(slash, ':');
	if (at) {
		pl->repo = strndup(slash + 1, (size_t)(at - slash - 1));
		pl->tag = strdup(at + 1);
		pl->by_digest = true;
	} else if (colon && !strchr(colon, '/')) {
		pl->repo = strndup(slash + 1, (size_t)(colon - slash - 1));
		pl->tag = strdup(colon + 1);
	} else {
		pl->repo = strdup(slash + 1);
		pl->tag = strdup("latest");
	}
	if (!pl->host || !pl->repo || !pl->tag)
		return -ENOMEM;
	if (pl->by_digest ? oci_digest_parse(pl->tag, d) : !oci_tag_valid(pl->tag))
		return why_first(pl->ic->why, pl->ic->why_len, -EINVAL, "%s: bad %s '%s'",
				 pl->label,
				 pl->by_digest ? "digest (want sha256:<64 lowercase hex>)"
					       : "tag", pl->tag);
	return 0;
}

/*
 * GET manifest ref; want: the digest it must have (by digest), else NULL. Its digest into
 * sum, the parsed document into *doc, its bytes into *body.
 */
static int get_doc(struct pull *pl, const char *ref, const uint8_t *want, uint8_t **body,
		   size_t *len, uint8_t sum[SHA256_LEN], struct json_object **doc)
{
	char why[1024], hex[SHA256_HEX_LEN + 1];
	char jwhy[WHY_MAX] = "";
	int ret;

	ret = registry_get_manifest(pl->r, ref, OCI_JSON_INDEX_MAX, body, len, why, sizeof(why));
	if (ret == -ENOENT && !want)
		return why_first(pl->ic->why, pl->ic->why_len, ret,
				 "%s: tag '%s' not found in repository %s/%s",
				 pl->label, ref, pl->host, pl->repo);
	if (ret == -ENOENT)
		return why_first(pl->ic->why, pl->ic->why_len, ret,
				 "%s: manifest %s not found in repository %s/%s",
				 pl->label, ref, pl->host, pl->repo);
	if (ret)
		return why_first(pl->ic->why, pl->ic->why_len, ret, "%s: %s", pl->label, why);
	ret = sha256_buf(*body, *len, sum);
	if (ret)
		return ret;
	sha256_to_hex(sum, hex);
	if (want && memcmp(sum, want, SHA256_LEN))
		return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
				 "%s: manifest %s: digest mismatch: the "
				 "registry sent sha256:%s", pl->label, ref, hex);
	oci_json_parse((const char *)*body, *len, OCI_JSON_INDEX, doc, jwhy, sizeof(jwhy));
	if (!*doc || !json_object_is_type(*doc, json_type_object))
		return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
				 "%s: manifest sha256:%s: %s", pl->label, hex,
				 *doc ? "not a JSON object" : jwhy);
	return 0;
}

static bool doc_is_index(struct json_object *doc)
{
	const char *mt = oci_json_str(doc, "mediaType");

	if (mt)
		return !strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST);
	return oci_json_get(doc, "manifests", json_type_array) &&
	       !oci_json_get(doc, "layers", json_type_array);
}

/* A descriptor's digest and size. */
static int desc_get(struct pull *pl, struct json_object *o, const char *what, uint8_t d[SHA256_LEN],
		    uint64_t *size)
{
	struct json_object *sz;
	char pb[128];

	if (!oci_json_str(o, "digest") || oci_digest_parse(oci_json_str(o, "digest"), d))
		return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
				 "%s: %s: bad or missing digest '%s'",
				 pl->label, what, esc_str(oci_json_str(o, "digest") ?: "",
								pb, sizeof(pb)));
	if (!json_object_object_get_ex(o, "size", &sz) || !json_object_is_type(sz, json_type_int) ||
	    json_object_get_int64(sz) < 0)
		return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
				 "%s: %s: descriptor has no valid size",
				 pl->label, what);
	*size = (uint64_t)json_object_get_int64(sz);
	return 0;
}

/* Down from the reference to one image manifest: *doc, its bytes and digest. */
static int resolve(struct pull *pl, uint8_t **body, size_t *len, uint8_t sum[SHA256_LEN],
		   struct json_object **doc)
{
	uint8_t want[SHA256_LEN];
	struct oci_platform plat;
	const char *p = pl->ic->o ? pl->ic->o->platform : NULL;
	char ref[8 + SHA256_HEX_LEN], buf[512], pb[100];
	int ret;

	if (oci_platform_parse(p, &plat))
		return why_first(pl->ic->why, pl->ic->why_len, -EINVAL,
				 "bad platform '%s' (want os/arch[/variant])",
				 p ? p : "(host)");
	if (pl->by_digest)
		oci_digest_parse(pl->tag, want);
	ret = get_doc(pl, pl->tag, pl->by_digest ? want : NULL, body, len, sum, doc);
	for (int depth = 0; !ret && doc_is_index(*doc); depth++) {
		struct json_object *list = oci_json_get(*doc, "manifests", json_type_array), *pick;
		uint64_t size;

		if (depth >= PULL_MAX_NESTING)
			return why_first(pl->ic->why, pl->ic->why_len, -ELOOP,
					 "%s: image indexes nested more than %d deep",
					 pl->label, PULL_MAX_NESTING);
		if (!list)
			return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
					 "%s: image index without \"manifests\"",
					 pl->label);
		pick = oci_platform_pick(list, &plat);
		if (!pick)
			return why_first(pl->ic->why, pl->ic->why_len, -ENOENT,
					 "%s: the image index has no %s image "
					 "(platforms: %s)", pl->label,
					 oci_platform_str(&plat, pb, sizeof(pb)),
					 oci_platform_list(list, buf, sizeof(buf)));
		ret = desc_get(pl, pick, "image", want, &size);
		if (ret)
			return ret;
		sha256_to_hex(want, ref + 7);
		memcpy(ref, "sha256:", 7);
		json_object_put(*doc);
		*doc = NULL;
		free(*body);
		*body = NULL;
		ret = get_doc(pl, ref, want, body, len, sum, doc);
		if (!ret && *len != size)
			ret = why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
					"%s: manifest %s: %zu bytes, the index "
					"says %llu", pl->label, ref, *len, (unsigned long long)size);
	}
	return ret;
}

/* The config and the layers of manifest doc, as blobs to fetch (each blob once). */
static int list_blobs(struct pull *pl, struct json_object *doc)
{
	struct json_object *layers = oci_json_get(doc, "layers", json_type_array), *sv;
	struct json_object *cfg = oci_json_get(doc, "config", json_type_object);
	size_t n;
	int ret;

	if (json_object_object_get_ex(doc, "schemaVersion", &sv) &&
	    (!json_object_is_type(sv, json_type_int) || json_object_get_int(sv) != 2))
		return why_first(pl->ic->why, pl->ic->why_len, -ENOTSUP,
				 "%s: not a schema 2 manifest (docker schema 1 "
				 "images are not supported)", pl->label);
	if (!layers || !cfg)
		return why_first(pl->ic->why, pl->ic->why_len, -EBADMSG,
				 "%s: not an image manifest (no config or "
				 "layers)", pl->label);
	n = json_object_array_length(layers) + 1;
	if (n > PULL_MAX_BLOBS)
		return why_first(pl->ic->why, pl->ic->why_len, -EFBIG,
				 "%s: %zu layers, more than %d", pl->label,
				 n - 1, PULL_MAX_BLOBS - 1);
	pl->blobs = calloc(n, sizeof(*pl->blobs));
	if (!pl->blobs)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct json_object *o = i ? json_object_array_get_idx(layers, i - 1) : cfg;
		struct pull_blob *b = &pl->blobs[pl->n_blobs];
		char what[32];

		snprintf(what, sizeof(what), i ? "layer %zu" : "config", i);
		ret = desc_get(pl, o, what, b->digest, &b->size);
		if (ret)
			return ret;
		/* a document: bounded before a byte of it is fetched (the layers are data) */
		if (!i && b->size > OCI_JSON_CONFIG_MAX)
			return why_first(pl->ic->why, pl->ic->why_len, -EFBIG,
					 "%s: config: the manifest says %llu bytes: %s (not "
					 "downloaded)", pl->label, (unsigned long long)b->size,
					 oci_json_limits(OCI_JSON_CONFIG)->too_big);
		ret = oci_files_add_blob(&pl->files, b->digest, &b->fd);
		if (ret == -EEXIST)
			continue; /* the same blob twice */
		if (ret)
			return why_first(pl->ic->why, pl->ic->why_len, ret,
					 "%s: store %s: tmp/: %s", pl->label,
					 pl->ic->o ? pl->ic->o->store_dir : "", strerror(-ret));
		pl->total += b->size;
		pl->n_blobs++;
	}
	return 0;
}

static void *fetch_worker(void *arg)
{
	struct pull *pl = arg;

	for (;;) {
		struct registry_blob rb = { .fetched = &pl->fetched, .cancel = &pl->stop };
		char why[1024];
		size_t i;
		int ret;

		pthread_mutex_lock(&pl->lock);
		i = pl->next++;
		pthread_mutex_unlock(&pl->lock);
		if (i >= pl->n_blobs || __atomic_load_n(&pl->stop, __ATOMIC_RELAXED))
			break;
		rb.digest = pl->blobs[i].digest;
		rb.size = pl->blobs[i].size;
		rb.fd = pl->blobs[i].fd;
		ret = registry_get_blob(pl->r, &rb, why, sizeof(why));
		if (ret) {
			pthread_mutex_lock(&pl->lock);
			if (!pl->err || (pl->err == -ECANCELED && ret != -ECANCELED)) {
				pl->err = ret;
				snprintf(pl->why, sizeof(pl->why), "%s", why);
			}
			pthread_mutex_unlock(&pl->lock);
			__atomic_store_n(&pl->stop, 1, __ATOMIC_RELAXED);
		}
	}
	pthread_mutex_lock(&pl->lock);
	pl->running--;
	pthread_cond_signal(&pl->cond);
	pthread_mutex_unlock(&pl->lock);
	return NULL;
}

static void fetch_progress(struct pull *pl)
{
	const struct import_opts *o = pl->ic->o;
	struct import_progress p = { .fetching = true, .fetch_size = pl->total };

	if (!o || !o->progress)
		return;
	p.fetched = __atomic_load_n(&pl->fetched, __ATOMIC_RELAXED);
	o->progress(o->progress_arg, &p);
}

/* Every blob into its staging file, PULL_PARALLEL at a time; progress meanwhile. */
static int fetch_all(struct pull *pl)
{
	const int *cancel = pl->ic->o ? pl->ic->o->cancel : NULL;
	pthread_t th[PULL_PARALLEL];
	unsigned n = 0;

	pthread_mutex_lock(&pl->lock);
	for (; n < PULL_PARALLEL && n < pl->n_blobs; n++) {
		if (pthread_create(&th[n], NULL, fetch_worker, pl))
			break;
		pl->running++;
	}
	while (pl->running) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 100 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&pl->cond, &pl->lock, &ts);
		if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED))
			__atomic_store_n(&pl->stop, 1, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&pl->lock);
		fetch_progress(pl);
		pthread_mutex_lock(&pl->lock);
	}
	pthread_mutex_unlock(&pl->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	if (!n && pl->n_blobs)
		return why_first(pl->ic->why, pl->ic->why_len, -EAGAIN, "%s: cannot start a thread",
				 pl->label);
	if (cancel && __atomic_load_n(cancel, __ATOMIC_RELAXED))
		return why_first(pl->ic->why, pl->ic->why_len, -ECANCELED, "interrupted");
	if (pl->err)
		return why_first(pl->ic->why, pl->ic->why_len, pl->err, "%s: %s", pl->label,
				 pl->why);
	return 0;
}

/* oci-layout, index.json naming the manifest, the manifest: the layout's own files. */
static int add_layout(struct pull *pl, struct json_object *doc, const uint8_t *body,
		      size_t len, const uint8_t sum[SHA256_LEN])
{
	static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}";
	const char *mt = oci_json_str(doc, "mediaType");
	char hex[SHA256_HEX_LEN + 1], name[16 + SHA256_HEX_LEN], *index;
	int ret;

	sha256_to_hex(sum, hex);
	if (asprintf(&index, "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\","
		     "\"digest\":\"sha256:%s\",\"size\":%zu}]}",
		     mt && !strchr(mt, '"') && !strchr(mt, '\\') ? mt : MT_OCI_MANIFEST, hex,
		     len) < 0)
		return -ENOMEM;
	snprintf(name, sizeof(name), "blobs/sha256/%s", hex);
	ret = oci_files_add_mem(&pl->files, "oci-layout", layout, strlen(layout));
	if (!ret)
		ret = oci_files_add_mem(&pl->files, "index.json", index, strlen(index));
	if (!ret && !oci_files_has(&pl->files, name))
		ret = oci_files_add_mem(&pl->files, name, body, len);
	free(index);
	if (ret)
		return why_first(pl->ic->why, pl->ic->why_len, ret, "%s: %s", pl->label,
				 strerror(-ret));
	return 0;
}

int import_registry(struct import_ctx *ic, const char *ref)
{
	struct pull pl = { .ic = ic, .label = ic->src_label ? ic->src_label : ref };
	struct json_object *doc = NULL;
	uint8_t *body = NULL, sum[SHA256_LEN];
	char why[1024];
	size_t len = 0;
	int ret;

	pthread_mutex_init(&pl.lock, NULL);
	pthread_cond_init(&pl.cond, NULL);
	pl.files.store = ic->store;
	ret = ref_parse(&pl, ref);
	if (!ret) {
		ret = registry_open(pl.host, pl.repo, ic->o && ic->o->insecure, &pl.r, why,
				    sizeof(why));
		if (ret)
			why_first(ic->why, ic->why_len, ret, "%s: %s", pl.label, why);
	}
	if (!ret)
		ret = resolve(&pl, &body, &len, sum, &doc);
	if (!ret)
		ret = list_blobs(&pl, doc);
	if (!ret)
		ret = add_layout(&pl, doc, body, len, sum);
	if (!ret)
		ret = fetch_all(&pl);
	remote_close(pl.r);
	if (!ret)
		ret = import_oci_files(ic, &pl.files, NULL);
	oci_files_free(&pl.files);
	json_object_put(doc);
	free(body);
	free(pl.blobs);
	free(pl.host);
	free(pl.repo);
	free(pl.tag);
	pthread_cond_destroy(&pl.cond);
	pthread_mutex_destroy(&pl.lock);
	return ret;
}
