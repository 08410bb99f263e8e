/* SPDX-License-Identifier: MIT */
/* The VM snapshot document (doc.h): canonical JSON built, strict JSON parsed. */
#include "doc.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "../cas/oci_json.h"
#include "../cas/remote/image_doc.h"
#include "../common/esc.h"
#include "../common/json_out.h"
#include "rammap.h"

#define P "snapshot document: "
/* 9999-12-31T23:59:59Z: the last time with a four-digit year */
#define CREATED_MAX 253402300799ull
#define RFC3339_LEN 20
#define CPUS_MAX 255u
#define SIZE_MAX_JSON ((uint64_t)INT64_MAX - 1)

/* ------------------------------------------------------------------ shared checks */

static bool model_valid(const char *s)
{
	size_t n = strnlen(s, sizeof(((struct snapdoc *)0)->cpu_model));

	if (n >= sizeof(((struct snapdoc *)0)->cpu_model))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] < 0x20 || s[i] > 0x7e || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

/* The length of the page map d describes (0: none can be). */
static uint64_t map_len(const struct snapdoc *d)
{
	if (d->ram_chunks > UINT32_MAX)
		return 0;
	return RAMMAP_HEADER + d->ram_chunks * RAMMAP_CHUNK_REC +
	       d->mem_size / RAMMAP_PAGE * RAMMAP_PAGE_REC;
}

/* What build writes and parse takes, beyond the syntax: 0 or -EINVAL with why. */
static int doc_check(const struct snapdoc *d, char *why, size_t why_len)
{
	uint64_t total = 0, npages = d->mem_size / RAMMAP_PAGE;

	if (d->created > CREATED_MAX)
		return why_set(why, why_len, -EINVAL, P "created after 9999-12-31T23:59:59Z");
	if (!d->mem_size || d->mem_size % RAMMAP_PAGE || d->mem_size > RAMMAP_MEM_MAX)
		return why_set(why, why_len, -EINVAL, P "machine.mem %llu: not a multiple of %u "
			       "from %u to %llu", (unsigned long long)d->mem_size, RAMMAP_PAGE,
			       RAMMAP_PAGE, RAMMAP_MEM_MAX);
	if (!d->ncpus || d->ncpus > CPUS_MAX)
		return why_set(why, why_len, -EINVAL, P "machine.cpus %u: not 1 to %u", d->ncpus,
			       CPUS_MAX);
	if (!model_valid(d->cpu_model))
		return why_set(why, why_len, -EINVAL, P "machine.cpuModel: more than 63 bytes, "
			       "or not printable ASCII without quotes and backslashes");
	if (!d->state.size || d->state.size > SNAPDOC_STATE_MAX)
		return why_set(why, why_len, -EINVAL, P "state.size %llu: not 1 to %u",
			       (unsigned long long)d->state.size, SNAPDOC_STATE_MAX);
	if (!d->nmap || d->nmap > SNAPDOC_MAP_MAX)
		return why_set(why, why_len, -EINVAL, P "ram.map: %u pieces (1 to %u)", d->nmap,
			       SNAPDOC_MAP_MAX);
	for (unsigned i = 0; i < d->nmap; i++) {
		if (!d->map[i].size || d->map[i].size > SNAPDOC_MAP_PIECE_MAX)
			return why_set(why, why_len, -EINVAL, P "ram.map[%u].size %llu: not 1 to %u",
				       i, (unsigned long long)d->map[i].size,
				       SNAPDOC_MAP_PIECE_MAX);
		total += d->map[i].size;
	}
	if (d->ram_pages > npages || d->ram_chunks > d->ram_pages ||
	    !d->ram_chunks != !d->ram_pages || d->ram_bytes % RAMMAP_PAGE ||
	    d->ram_bytes < d->ram_chunks * RAMMAP_PAGE ||
	    d->ram_bytes > d->ram_chunks * RAMMAP_CHUNK_PAGES_MAX * (uint64_t)RAMMAP_PAGE)
		return why_set(why, why_len, -EINVAL, P "ram: %llu pages, %llu chunks, %llu bytes "
			       "do not fit %llu pages of RAM", (unsigned long long)d->ram_pages,
			       (unsigned long long)d->ram_chunks, (unsigned long long)d->ram_bytes,
			       (unsigned long long)npages);
	if (total != map_len(d))
		return why_set(why, why_len, -EINVAL, P "ram.map: %llu bytes in all, a map of %llu "
			       "chunks over %llu pages is %llu", (unsigned long long)total,
			       (unsigned long long)d->ram_chunks, (unsigned long long)npages,
			       (unsigned long long)map_len(d));
	if (d->has_disk && (!d->disk_size || d->disk_size > SIZE_MAX_JSON))
		return why_set(why, why_len, -EINVAL, P "disk.size %llu out of range",
			       (unsigned long long)d->disk_size);
	return 0;
}

/* ------------------------------------------------------------------ building */

static void put_digest(struct json_buf *b, const char *key, const uint8_t d[SHA256_LEN])
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(d, hex);
	json_buf_printf(b, "\"%s\":\"sha256:%s\"", key, hex);
}

static void put_blob(struct json_buf *b, const struct snapdoc_blob *x)
{
	json_buf_puts(b, "{");
	put_digest(b, "digest", x->digest);
	json_buf_printf(b, ",\"size\":%llu}", (unsigned long long)x->size);
}

int snapdoc_build(const struct snapdoc *d, char **json, size_t *len)
{
	struct json_buf b = { 0 };
	char created[RFC3339_LEN + 1];
	time_t t = (time_t)d->created;
	struct tm tm;

	*json = NULL;
	*len = 0;
	if (doc_check(d, NULL, 0) || !gmtime_r(&t, &tm) ||
	    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm) != RFC3339_LEN)
		return -EINVAL;
	json_buf_printf(&b, "{\"mediaType\":\"" SNAPDOC_MEDIA_TYPE "\",\"version\":%u,"
			"\"created\":\"%s\",\"machine\":{\"mem\":%llu,\"cpus\":%u,\"cpu\":\"",
			SNAPDOC_VERSION, created, (unsigned long long)d->mem_size, d->ncpus);
	for (unsigned i = 0; i < SNAPDOC_CPU_SIG; i++)
		json_buf_printf(&b, "%02x", d->cpu_sig[i]);
	json_buf_printf(&b, "\",\"cpuModel\":\"%s\"},", d->cpu_model);
	put_digest(&b, "kernel", d->kernel);
	json_buf_puts(&b, ",\"state\":");
	put_blob(&b, &d->state);
	json_buf_puts(&b, ",\"ram\":{\"map\":[");
	for (unsigned i = 0; i < d->nmap; i++) {
		if (i)
			json_buf_puts(&b, ",");
		put_blob(&b, &d->map[i]);
	}
	json_buf_printf(&b, "],\"pages\":%llu,\"chunks\":%llu,\"bytes\":%llu}",
			(unsigned long long)d->ram_pages, (unsigned long long)d->ram_chunks,
			(unsigned long long)d->ram_bytes);
	if (d->has_disk) {
		json_buf_puts(&b, ",\"disk\":{");
		put_digest(&b, "layout", d->layout);
		json_buf_printf(&b, ",\"size\":%llu}", (unsigned long long)d->disk_size);
	}
	if (d->has_parent) {
		json_buf_puts(&b, ",");
		put_digest(&b, "parent", d->parent);
	}
	json_buf_puts(&b, "}");
	if (b.err) {
		json_buf_free(&b);
		return b.err;
	}
	*json = json_buf_take(&b, len);
	return 0;
}

/* ------------------------------------------------------------------ parsing */

/* Every key of o is one of keys (NULL-terminated); else -EBADMSG naming it. */
static int keys_only(struct json_object *o, const char *where, const char *const *keys,
		     char *why, size_t why_len)
{
	char esc[ESC_LEN(64)];

	json_object_object_foreach(o, key, val) {
		size_t i = 0;

		(void)val;
		while (keys[i] && strcmp(keys[i], key))
			i++;
		if (!keys[i])
			return why_set(why, why_len, -EBADMSG, P "%s: unknown key \"%s\"", where,
				       esc_str(key, esc, sizeof(esc)));
	}
	return 0;
}

static int bad(char *why, size_t why_len, const char *what)
{
	return why_set(why, why_len, -EBADMSG, P "%s", what);
}

/* "YYYY-MM-DDTHH:MM:SSZ", a real time (no Feb 30th), into seconds since the epoch. */
static int created_parse(const char *s, uint64_t *out)
{
	static const char form[] = "dddd-dd-ddTdd:dd:ddZ";
	struct tm tm = { 0 }, back;
	time_t t;

	if (!s || strlen(s) != RFC3339_LEN)
		return -EBADMSG;
	for (size_t i = 0; i < RFC3339_LEN; i++)
		if (form[i] == 'd' ? s[i] < '0' || s[i] > '9' : s[i] != form[i])
			return -EBADMSG;
	tm.tm_year = atoi(s) - 1900;
	tm.tm_mon = atoi(s + 5) - 1;
	tm.tm_mday = atoi(s + 8);
	tm.tm_hour = atoi(s + 11);
	tm.tm_min = atoi(s + 14);
	tm.tm_sec = atoi(s + 17);
	back = tm;
	t = timegm(&tm);
	if (t < 0 || tm.tm_year != back.tm_year || tm.tm_mon != back.tm_mon ||
	    tm.tm_mday != back.tm_mday || tm.tm_hour != back.tm_hour || tm.tm_min != back.tm_min ||
	    tm.tm_sec != back.tm_sec)
		return -EBADMSG;
	*out = (uint64_t)t;
	return 0;
}

static int sig_parse(const char *s, uint8_t sig[SNAPDOC_CPU_SIG])
{
	if (!s || strlen(s) != 2 * SNAPDOC_CPU_SIG)
		return -EBADMSG;
	for (unsigned i = 0; i < 2 * SNAPDOC_CPU_SIG; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return -EBADMSG;
	for (unsigned i = 0; i < SNAPDOC_CPU_SIG; i++)
		sig[i] = (uint8_t)(hex_nibble(s[2 * i]) << 4 | hex_nibble(s[2 * i + 1]));
	return 0;
}

/* {"digest":"sha256:...","size":N} */
static int blob_parse(struct json_object *o, struct snapdoc_blob *b)
{
	static const char *const keys[] = { "digest", "size", NULL };

	if (!o || keys_only(o, "", keys, NULL, 0) ||
	    oci_digest_parse(oci_json_str(o, "digest"), b->digest) || oci_json_u64(o, "size", &b->size))
		return -EBADMSG;
	return 0;
}

static int machine_parse(struct json_object *m, struct snapdoc *d, char *why, size_t why_len)
{
	static const char *const keys[] = { "mem", "cpus", "cpu", "cpuModel", NULL };
	const char *model = oci_json_str(m, "cpuModel");
	uint64_t cpus;

	if (!m)
		return bad(why, why_len, "no machine object");
	if (keys_only(m, "machine", keys, why, why_len))
		return -EBADMSG;
	if (oci_json_u64(m, "mem", &d->mem_size) || oci_json_u64(m, "cpus", &cpus) || cpus > CPUS_MAX ||
	    sig_parse(oci_json_str(m, "cpu"), d->cpu_sig) || !model ||
	    strlen(model) >= sizeof(d->cpu_model))
		return bad(why, why_len, "machine: mem, cpus, cpu (32 lowercase hex) and cpuModel "
			   "(up to 63 bytes) wanted");
	d->ncpus = (uint32_t)cpus;
	strcpy(d->cpu_model, model);
	return 0;
}

static int ram_parse(struct json_object *r, struct snapdoc *d, char *why, size_t why_len)
{
	static const char *const keys[] = { "map", "pages", "chunks", "bytes", NULL };
	struct json_object *map = oci_json_get(r, "map", json_type_array);
	size_t n;

	if (!r)
		return bad(why, why_len, "no ram object");
	if (keys_only(r, "ram", keys, why, why_len))
		return -EBADMSG;
	if (!map || oci_json_u64(r, "pages", &d->ram_pages) || oci_json_u64(r, "chunks", &d->ram_chunks) ||
	    oci_json_u64(r, "bytes", &d->ram_bytes))
		return bad(why, why_len, "ram: map, pages, chunks and bytes wanted");
	n = json_object_array_length(map);
	if (!n || n > SNAPDOC_MAP_MAX)
		return why_set(why, why_len, -EBADMSG, P "ram.map: %zu pieces (1 to %u)", n,
			       SNAPDOC_MAP_MAX);
	for (size_t i = 0; i < n; i++)
		if (blob_parse(json_object_array_get_idx(map, i), &d->map[i]))
			return why_set(why, why_len, -EBADMSG, P "ram.map[%zu]: not {\"digest\":"
				       "\"sha256:<64 lowercase hex>\",\"size\":N}", i);
	d->nmap = (unsigned)n;
	return 0;
}

static int disk_parse(struct json_object *o, struct snapdoc *d, char *why, size_t why_len)
{
	static const char *const keys[] = { "layout", "size", NULL };

	if (keys_only(o, "disk", keys, why, why_len))
		return -EBADMSG;
	if (oci_digest_parse(oci_json_str(o, "layout"), d->layout) ||
	    oci_json_u64(o, "size", &d->disk_size))
		return bad(why, why_len, "disk: layout (sha256:<64 lowercase hex>) and size wanted");
	d->has_disk = true;
	return 0;
}

/* What the document is: ours of version 1 (0), or refused by name. */
static int kind_check(struct json_object *root, char *why, size_t why_len)
{
	const char *mt = oci_json_str(root, "mediaType");
	const char *at = oci_json_str(root, "artifactType");
	struct json_object *v = oci_json_get(root, "version", json_type_int);
	char esc[ESC_LEN(64)];

	if ((mt && (!strcmp(mt, IMAGE_MT_JSON) || !strcmp(mt, IMAGE_ARTIFACT))) ||
	    (at && (!strcmp(at, IMAGE_ARTIFACT) || !strcmp(at, IMAGE_MT_JSON))))
		return why_set(why, why_len, -EPROTONOSUPPORT,
			       "a lazyblk disk image, not a VM snapshot");
	if (!mt)
		return bad(why, why_len, "no mediaType (not a VM snapshot document)");
	if (strcmp(mt, SNAPDOC_MEDIA_TYPE))
		return why_set(why, why_len, -EPROTONOSUPPORT, "not a VM snapshot document "
			       "(mediaType \"%s\")", esc_str(mt, esc, sizeof(esc)));
	if (!v)
		return bad(why, why_len, "no version");
	if (json_object_get_int64(v) != SNAPDOC_VERSION)
		return why_set(why, why_len, -EPROTONOSUPPORT, P "version %lld (this lazyblk reads "
			       "version %u)", (long long)json_object_get_int64(v), SNAPDOC_VERSION);
	return 0;
}

static int root_parse(struct json_object *root, struct snapdoc *d, char *why, size_t why_len)
{
	static const char *const keys[] = { "mediaType", "version", "created", "machine", "kernel",
					    "state", "ram", "disk", "parent", NULL };
	struct json_object *disk = NULL;
	const char *parent;
	int ret;

	ret = kind_check(root, why, why_len);
	if (!ret)
		ret = keys_only(root, "document", keys, why, why_len);
	if (ret)
		return ret;
	if (created_parse(oci_json_str(root, "created"), &d->created))
		return bad(why, why_len, "created: not an RFC 3339 UTC time (2026-12-08T10:00:00Z)");
	ret = machine_parse(oci_json_get(root, "machine", json_type_object), d, why, why_len);
	if (ret)
		return ret;
	if (oci_digest_parse(oci_json_str(root, "kernel"), d->kernel))
		return bad(why, why_len, "kernel: not sha256:<64 lowercase hex>");
	if (blob_parse(oci_json_get(root, "state", json_type_object), &d->state))
		return bad(why, why_len, "state: not {\"digest\":\"sha256:<64 lowercase hex>\","
			   "\"size\":N}");
	ret = ram_parse(oci_json_get(root, "ram", json_type_object), d, why, why_len);
	if (ret)
		return ret;
	if (json_object_object_get_ex(root, "disk", &disk)) {
		if (!json_object_is_type(disk, json_type_object))
			return bad(why, why_len, "disk: not an object");
		ret = disk_parse(disk, d, why, why_len);
		if (ret)
			return ret;
	}
	parent = oci_json_str(root, "parent");
	if (json_object_object_get_ex(root, "parent", NULL) &&
	    oci_digest_parse(parent, d->parent))
		return bad(why, why_len, "parent: not sha256:<64 lowercase hex>");
	d->has_parent = parent != NULL;
	ret = doc_check(d, why, why_len);
	return ret ? -EBADMSG : 0;
}

int snapdoc_parse(const char *json, size_t len, struct snapdoc *d, char *why, size_t why_len)
{
	struct json_object *root;
	char jwhy[WHY_MAX] = "";
	int ret;

	memset(d, 0, sizeof(*d));
	if (len > SNAPDOC_MAX)
		return why_set(why, why_len, -EFBIG, P "%zu bytes, more than %u", len, SNAPDOC_MAX);
	if (!json || !len || memchr(json, '\0', len))
		return bad(why, why_len, "empty, or a NUL byte in it");
	ret = oci_json_parse(json, len, OCI_JSON_MANIFEST, &root, jwhy, sizeof(jwhy));
	if (ret)
		return why_set(why, why_len, ret, P "%s", jwhy);
	if (!json_object_is_type(root, json_type_object))
		ret = bad(why, why_len, "not a JSON object");
	else
		ret = root_parse(root, d, why, why_len);
	json_object_put(root);
	if (ret)
		memset(d, 0, sizeof(*d));
	return ret;
}
