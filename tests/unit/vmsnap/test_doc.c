/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for vmsnap/doc.c: the snapshot document built as canonical JSON and parsed
 * back to the same struct and the same bytes; every truncation refused; unknown keys, bad
 * digests, times and sizes refused; a newer version and a lazyblk disk image refused by
 * name; a document over the size limit.
 */
#include "../helpers.h"

#include "../../../cas/remote/image_doc.h"
#include "../../../vmsnap/doc.h"
#include "../../../vmsnap/rammap.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

/* 1 GiB of RAM, 10 chunks: a map of 64 + 400 + 2 MiB bytes in three pieces. */
static void doc_fill(struct snapdoc *d, bool disk, bool parent)
{
	memset(d, 0, sizeof(*d));
	d->created = 1796724000; /* 2026-12-08T10:00:00Z */
	d->mem_size = 1ull << 30;
	d->ncpus = 2;
	for (unsigned i = 0; i < SNAPDOC_CPU_SIG; i++)
		d->cpu_sig[i] = (uint8_t)(0xa0 + i);
	snprintf(d->cpu_model, sizeof(d->cpu_model), "GenuineIntel family 6 model 85");
	memset(d->kernel, 0x11, SHA256_LEN);
	memset(d->state.digest, 0x22, SHA256_LEN);
	d->state.size = 123456;
	d->nmap = 3;
	for (unsigned i = 0; i < 3; i++) {
		memset(d->map[i].digest, 0x30 + i, SHA256_LEN);
		d->map[i].size = 1u << 20;
	}
	d->map[2].size = RAMMAP_HEADER + 10 * RAMMAP_CHUNK_REC;
	d->ram_pages = 100;
	d->ram_chunks = 10;
	d->ram_bytes = 10 * 64 * RAMMAP_PAGE;
	if (disk) {
		d->has_disk = true;
		memset(d->layout, 0x44, SHA256_LEN);
		d->disk_size = 8ull << 30;
	}
	if (parent) {
		d->has_parent = true;
		memset(d->parent, 0x55, SHA256_LEN);
	}
}

static char *build(const struct snapdoc *d, size_t *len)
{
	char *json;

	assert_int_equal(snapdoc_build(d, &json, len), 0);
	assert_int_equal(strlen(json), *len);
	return json;
}

static void roundtrip(bool disk, bool parent)
{
	struct snapdoc d, d2;
	char *json, *json2;
	size_t len, len2;
	char why[WHY_MAX] = "";

	doc_fill(&d, disk, parent);
	json = build(&d, &len);
	assert_int_equal(snapdoc_parse(json, len, &d2, why, sizeof(why)), 0);
	assert_memory_equal(&d, &d2, sizeof(d));
	json2 = build(&d2, &len2);
	assert_int_equal(len2, len);
	assert_memory_equal(json2, json, len);
	free(json2);
	free(json);
}

static void test_roundtrip(void **state)
{
	(void)state;
	roundtrip(false, false);
	roundtrip(true, false);
	roundtrip(false, true);
	roundtrip(true, true);
}

static void test_canonical(void **state)
{
	struct snapdoc d;
	char *json;
	size_t len;

	(void)state;
	doc_fill(&d, true, true);
	json = build(&d, &len);
	assert_non_null(strstr(json, "{\"mediaType\":\"application/vnd.lazyblk.vm-snapshot.v1+json\","
			       "\"version\":1,\"created\":\"2026-12-08T10:00:00Z\",\"machine\":"
			       "{\"mem\":1073741824,\"cpus\":2,\"cpu\":\"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf\","
			       "\"cpuModel\":\"GenuineIntel family 6 model 85\"},\"kernel\":\"sha256:1111"));
	assert_non_null(strstr(json, "],\"pages\":100,\"chunks\":10,\"bytes\":2621440},\"disk\":"
			       "{\"layout\":\"sha256:4444"));
	assert_non_null(strstr(json, ",\"size\":8589934592},\"parent\":\"sha256:5555"));
	assert_null(strpbrk(json, "\n\t\r"));
	assert_int_equal(json[len - 1], '}');
	free(json);
}

static void test_build_bad(void **state)
{
	struct snapdoc d;
	char *json;
	size_t len;

	(void)state;
	doc_fill(&d, false, false);
	d.cpu_model[3] = '"';
	assert_int_equal(snapdoc_build(&d, &json, &len), -EINVAL);
	doc_fill(&d, false, false);
	d.map[2].size++;
	assert_int_equal(snapdoc_build(&d, &json, &len), -EINVAL);
	doc_fill(&d, false, false);
	d.nmap = 0;
	assert_int_equal(snapdoc_build(&d, &json, &len), -EINVAL);
	doc_fill(&d, false, false);
	d.created = 253402300800ull;
	assert_int_equal(snapdoc_build(&d, &json, &len), -EINVAL);
	doc_fill(&d, false, false);
	d.created = 253402300799ull;
	json = build(&d, &len);
	assert_non_null(strstr(json, "\"9999-12-31T23:59:59Z\""));
	free(json);
}

static void test_truncated(void **state)
{
	struct snapdoc d;
	char *json;
	size_t len;
	char why[WHY_MAX];

	(void)state;
	doc_fill(&d, true, true);
	json = build(&d, &len);
	for (size_t n = 0; n < len; n++) {
		why[0] = '\0';
		assert_int_equal(snapdoc_parse(json, n, &d, why, sizeof(why)), -EBADMSG);
		assert_true(why[0]);
	}
	free(json);
}

/* The built document with from replaced by to: refused with err, the reason holding want. */
static void expect_bad(const char *from, const char *to, int err, const char *want)
{
	struct snapdoc d;
	char *json, *at, *bad;
	size_t len;
	char why[WHY_MAX] = "";

	doc_fill(&d, true, true);
	json = build(&d, &len);
	at = strstr(json, from);
	assert_non_null(at);
	bad = malloc(len + strlen(to) + 1);
	assert_non_null(bad);
	memcpy(bad, json, (size_t)(at - json));
	strcpy(bad + (at - json), to);
	strcat(bad, at + strlen(from));
	assert_int_equal(snapdoc_parse(bad, strlen(bad), &d, why, sizeof(why)), err);
	if (!strstr(why, want))
		fail_msg("reason \"%s\" lacks \"%s\"", why, want);
	assert_int_equal(d.mem_size, 0);
	free(bad);
	free(json);
}

static void test_hostile(void **state)
{
	(void)state;
	expect_bad("\"version\":1,", "\"version\":1,\"extra\":1,", -EBADMSG,
		   "document: unknown key \"extra\"");
	expect_bad("\"cpus\":2,", "\"cpus\":2,\"numa\":[],", -EBADMSG,
		   "machine: unknown key \"numa\"");
	expect_bad("\"pages\":100,", "\"pages\":100,\"x\\u001b[2J\":0,", -EBADMSG,
		   "ram: unknown key \"x\\x1b[2J\"");
	expect_bad("\"disk\":{", "\"disk\":{\"k\":0,", -EBADMSG, "disk: unknown key \"k\"");
	expect_bad("\"kernel\":\"sha256:1", "\"kernel\":\"sha256:A", -EBADMSG, "kernel:");
	expect_bad("\"kernel\":\"sha256:", "\"kernel\":\"sha512:", -EBADMSG, "kernel:");
	expect_bad("\"parent\":\"sha256:5", "\"parent\":\"sha256:", -EBADMSG, "parent:");
	expect_bad("\"state\":{\"digest\":\"sha256:2", "\"state\":{\"digest\":\"sha256:", -EBADMSG,
		   "state:");
	expect_bad("\"map\":[{\"digest\":\"sha256:3", "\"map\":[{\"digest\":\"sha256:g", -EBADMSG,
		   "ram.map[0]:");
	expect_bad("\"version\":1", "\"version\":2", -EPROTONOSUPPORT,
		   "snapshot document: version 2 (this lazyblk reads version 1)");
	expect_bad("vm-snapshot.v1+json", "vm-snapshot.v2+json", -EPROTONOSUPPORT,
		   "not a VM snapshot document (mediaType \"application/vnd.lazyblk.vm-snapshot.v2+json\")");
	expect_bad("application/vnd.lazyblk.vm-snapshot.v1+json", IMAGE_MT_JSON, -EPROTONOSUPPORT,
		   "a lazyblk disk image, not a VM snapshot");
	expect_bad("\"version\":1,", "\"version\":1,\"artifactType\":\"" IMAGE_ARTIFACT "\",",
		   -EPROTONOSUPPORT, "a lazyblk disk image, not a VM snapshot");
	expect_bad("2026-12-08T10:00:00Z", "2026-02-30T10:00:00Z", -EBADMSG, "created:");
	expect_bad("2026-12-08T10:00:00Z", "2026-12-08T10:00:00+01:00", -EBADMSG, "created:");
	expect_bad("2026-12-08T10:00:00Z", "1969-12-31T23:59:59Z", -EBADMSG, "created:");
	expect_bad("\"mem\":1073741824", "\"mem\":1073741825", -EBADMSG, "machine.mem");
	expect_bad("\"mem\":1073741824", "\"mem\":-1073741824", -EBADMSG, "machine:");
	expect_bad("\"cpus\":2", "\"cpus\":0", -EBADMSG, "machine.cpus 0");
	expect_bad("\"cpu\":\"a0", "\"cpu\":\"A0", -EBADMSG, "machine:");
	expect_bad("\"size\":123456", "\"size\":67108865", -EBADMSG, "state.size");
	expect_bad("\"size\":464", "\"size\":465", -EBADMSG, "ram.map: 2097617 bytes in all");
	expect_bad("\"chunks\":10", "\"chunks\":101", -EBADMSG, "ram: 100 pages, 101 chunks");
	expect_bad("\"bytes\":2621440", "\"bytes\":2621441", -EBADMSG, "ram: 100 pages");
	expect_bad("\"size\":8589934592", "\"size\":0", -EBADMSG, "disk.size 0");
	expect_bad("\"mediaType\"", "\"mediatype\"", -EBADMSG, "no mediaType");
	expect_bad("{\"mediaType\"", "[{\"mediaType\"", -EBADMSG, "not JSON");
}

static void test_image_json(void **state)
{
	struct image_desc img = { .n_layouts = 1, .disk_size = 1 << 20 };
	struct snapdoc d;
	char *json;
	size_t len;
	char why[WHY_MAX] = "";

	(void)state;
	assert_int_equal(image_json_build(&img, "2026-12-01T22:00:00Z", &json, &len), 0);
	assert_int_equal(snapdoc_parse(json, len, &d, why, sizeof(why)), -EPROTONOSUPPORT);
	assert_string_equal(why, "a lazyblk disk image, not a VM snapshot");
	free(json);
}

static void test_too_large(void **state)
{
	struct snapdoc d;
	char *json, *big;
	size_t len;
	char why[WHY_MAX] = "";

	(void)state;
	doc_fill(&d, true, true);
	json = build(&d, &len);
	big = malloc(SNAPDOC_MAX + 1);
	assert_non_null(big);
	memset(big, ' ', SNAPDOC_MAX + 1);
	memcpy(big, json, len);
	assert_int_equal(snapdoc_parse(big, SNAPDOC_MAX, &d, why, sizeof(why)), 0);
	assert_int_equal(snapdoc_parse(big, SNAPDOC_MAX + 1, &d, why, sizeof(why)), -EFBIG);
	assert_non_null(strstr(why, "more than 65536"));
	free(big);
	free(json);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_canonical),
		cmocka_unit_test(test_build_bad),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_hostile),
		cmocka_unit_test(test_image_json),
		cmocka_unit_test(test_too_large),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
