/* SPDX-License-Identifier: MIT */
/*
 * Import of an OCI image layout (cas/import/import_oci.c, `lazyblk import oci:DIR`): the
 * input is split at lines "----" into index.json and up to BLOBS_MAX blobs, written as
 * DIR/index.json and DIR/blobs/sha256/<digest> (with DIR/oci-layout). So that the fuzzer
 * need not find sha256 values, "@N" in a part becomes "sha256:<digest of blob N>" and "#N"
 * the blob's size (N a digit, blob N a later part than the one naming it: blob 1 is the
 * first after index.json); a blob that is a tar gets its header checksums recomputed.
 * Nested indexes, manifests, configs (diff_ids), media types and layers are parsed.
 */
#include "fuzz_import.h"

#define BLOBS_MAX 8
#define SEP "\n----\n"

struct part {
	const uint8_t *p;
	size_t len;
	uint8_t *out;      /* after substitution */
	size_t out_len;
	char hex[SHA256_HEX_LEN + 1];
};

/* Replace @N and #N by blob N's digest and size (N > self), into pt->out. */
static void subst(struct part *parts, unsigned n, unsigned self)
{
	struct part *pt = &parts[self];
	size_t cap = pt->len * 40 + 1, o = 0;
	uint8_t *out = malloc(cap);

	if (!out)
		abort();
	for (size_t i = 0; i < pt->len; i++) {
		unsigned k = i + 1 < pt->len ? (unsigned)(pt->p[i + 1] - '0') : 99;

		if ((pt->p[i] == '@' || pt->p[i] == '#') && k > self && k < n) {
			if (pt->p[i] == '@')
				o += (size_t)snprintf((char *)out + o, cap - o, "sha256:%s",
						      parts[k].hex);
			else
				o += (size_t)snprintf((char *)out + o, cap - o, "%zu",
						      parts[k].out_len);
			i++;
		} else {
			out[o++] = pt->p[i];
		}
	}
	pt->out = out;
	pt->out_len = o;
}

static unsigned split(const uint8_t *data, size_t size, struct part *parts)
{
	unsigned n = 0;
	size_t start = 0, sl = strlen(SEP);

	while (n < BLOBS_MAX) {
		const uint8_t *s = memmem(data + start, size - start, SEP, sl);
		size_t end = s ? (size_t)(s - data) : size;

		parts[n].p = data + start;
		parts[n++].len = end - start;
		if (!s)
			break;
		start = end + sl;
	}
	return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct part parts[BLOBS_MAX] = { 0 };
	char dir[PATH_MAX], path[PATH_MAX * 2], src[PATH_MAX + 8];
	unsigned n = split(data, size, parts);
	uint8_t d[SHA256_LEN];

	fuzz_path(dir, sizeof(dir), "oci");
	snprintf(path, sizeof(path), "%s/blobs/sha256", dir);
	if (fs_mkdir_p(path, 0755))
		abort();
	for (unsigned i = n; i-- > 0;) {
		subst(parts, n, i);
		if (parts[i].out_len >= 1024 && !memcmp(parts[i].out + 257, "ustar", 5))
			fuzz_fix_tar(parts[i].out, parts[i].out_len, 1);
		sha256_buf(parts[i].out, parts[i].out_len, d);
		sha256_to_hex(d, parts[i].hex);
		if (i)
			snprintf(path, sizeof(path), "%s/blobs/sha256/%s", dir, parts[i].hex);
		else
			snprintf(path, sizeof(path), "%s/index.json", dir);
		fuzz_write_file(path, parts[i].out, parts[i].out_len);
	}
	snprintf(path, sizeof(path), "%s/oci-layout", dir);
	fuzz_write_file(path, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
	snprintf(src, sizeof(src), "oci:%s", dir);
	fuzz_import(src);
	for (unsigned i = 0; i < n; i++)
		free(parts[i].out);
	fuzz_rmtree(dir);
	return 0;
}
