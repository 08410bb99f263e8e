/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "../cas/manifest.h"
#include "../cas/oci_json.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char manifest_usage[] =
	"usage: lazyblk manifest show [--summary] IMAGE.manifest\n"
	"\n"
	"Print a manifest. By default the whole manifest as one JSON document:\n"
	"  {\"version\", \"digest\", \"chunk_size\", \"entry_count\", \"config\", \"entries\": [...]}\n"
	"Each entry has path, type (file, dir, symlink, hardlink, char, block, fifo, socket),\n"
	"mode (octal string, incl. setuid/setgid/sticky), uid, gid, size, atime/mtime/ctime\n"
	"(seconds) with *_ns (nanoseconds), and where they apply: link (symlink or hardlink\n"
	"target), rdev [major, minor], xattrs [{name, value}], holes [[offset, length]],\n"
	"chunks [{digest, off, len}] (len bytes at off of the chunk named digest). A byte string that is not valid UTF-8 is written as\n"
	"KEY_hex (path_hex, link_hex, value_hex) with its bytes in hex.\n"
	"\n"
	"options:\n"
	"  --summary   counts by type, sizes and chunk figures instead of JSON\n"
	"  -h, --help  this text\n";

static void show_entry(FILE *f, const struct manifest *m, const struct mf_entry *e)
{
	char hex[SHA256_HEX_LEN + 1];

	fputc('{', f);
	json_write_field_bytes(f, "path", manifest_path(m, e), e->path_len);
	fprintf(f, ",\"type\":\"%s\",\"mode\":\"%04o\",\"uid\":%u,\"gid\":%u,\"size\":%llu",
		manifest_type_name(e->type), e->mode, e->uid, e->gid, (unsigned long long)e->size);
	fprintf(f, ",\"atime\":%lld,\"atime_ns\":%u,\"mtime\":%lld,\"mtime_ns\":%u"
		   ",\"ctime\":%lld,\"ctime_ns\":%u",
		(long long)e->atime, e->atime_ns, (long long)e->mtime, e->mtime_ns,
		(long long)e->ctime, e->ctime_ns);
	if (e->type == MF_SYMLINK || e->type == MF_HARDLINK) {
		fputc(',', f);
		json_write_field_bytes(f, "link", manifest_str(m, e->link_off), e->link_len);
	}
	if (e->type == MF_CHR || e->type == MF_BLK)
		fprintf(f, ",\"rdev\":[%u,%u]", e->rdev_major, e->rdev_minor);
	if (e->xattr_count) {
		fputs(",\"xattrs\":[", f);
		for (uint32_t i = 0; i < e->xattr_count; i++) {
			const struct mf_xattr *x = &m->xattrs[e->xattr_first + i];

			fputs(i ? ",{" : "{", f);
			json_write_field_bytes(f, "name", manifest_str(m, x->name_off), x->name_len);
			fputc(',', f);
			json_write_field_bytes(f, "value", manifest_str(m, x->value_off),
					       x->value_len);
			fputc('}', f);
		}
		fputc(']', f);
	}
	if (e->hole_count) {
		fputs(",\"holes\":[", f);
		for (uint32_t i = 0; i < e->hole_count; i++) {
			const struct mf_hole *h = &m->holes[e->hole_first + i];

			fprintf(f, "%s[%llu,%llu]", i ? "," : "", (unsigned long long)h->off,
				(unsigned long long)h->len);
		}
		fputc(']', f);
	}
	if (e->type == MF_REG) {
		fputs(",\"chunks\":[", f);
		for (uint32_t i = 0; i < e->chunk_count; i++) {
			const struct mf_chunk *c = &m->chunks[e->chunk_first + i];

			sha256_to_hex(c->digest, hex);
			fprintf(f, "%s{\"digest\":\"%s\",\"off\":%u,\"len\":%u}", i ? "," : "",
				hex, c->off, c->len);
		}
		fputc(']', f);
	}
	fputc('}', f);
}

static void show_json(FILE *f, const struct manifest *m)
{
	char hex[SHA256_HEX_LEN + 1];

	sha256_to_hex(m->digest, hex);
	fprintf(f, "{\"version\":%u,\"digest\":\"sha256:%s\",\"chunk_size\":%u,"
		   "\"entry_count\":%zu",
		m->hdr->version, hex, m->hdr->chunk_size, m->n_entries);
	if (m->hdr->config_len) {
		struct json_object *cfg;

		oci_json_parse(manifest_str(m, m->hdr->config_off), m->hdr->config_len,
			       OCI_JSON_CONFIG, &cfg, NULL, 0);

		fputs(",\"config\":", f);
		if (cfg)
			fputs(json_object_to_json_string_ext(cfg, JSON_C_TO_STRING_PLAIN), f);
		else
			json_write_str(f, "(unparsable)", 12);
		json_object_put(cfg);
	}
	fputs(",\"entries\":[\n", f);
	for (size_t i = 0; i < m->n_entries; i++) {
		show_entry(f, m, &m->entries[i]);
		fputs(i + 1 < m->n_entries ? ",\n" : "\n", f);
	}
	fputs("]}\n", f);
}

static void show_summary(FILE *f, const struct manifest *m)
{
	char hex[SHA256_HEX_LEN + 1], h1[32], h2[32];
	struct manifest_totals t;
	bool distinct = !manifest_totals(m, &t);

	sha256_to_hex(m->digest, hex);
	fprintf(f, "manifest     sha256:%s (version %u)\n", hex, m->hdr->version);
	fprintf(f, "entries      %zu\n", m->n_entries);
	for (int ty = MF_REG; ty <= MF_SOCK; ty++)
		if (t.by_type[ty])
			fprintf(f, "  %-10s %llu\n", manifest_type_name((uint8_t)ty),
				(unsigned long long)t.by_type[ty]);
	fprintf(f, "file bytes   %llu (%s), of which holes %s\n", (unsigned long long)t.file_bytes,
		size_human(t.file_bytes, h1, sizeof(h1)), size_human(t.hole_bytes, h2, sizeof(h2)));
	fprintf(f, "chunks       %zu references", m->n_chunks);
	if (distinct)
		fprintf(f, " to %llu chunks", (unsigned long long)t.chunks);
	fprintf(f, ", chunk size %s\n", size_human(m->hdr->chunk_size, h1, sizeof(h1)));
	fprintf(f, "xattrs       %llu\n", (unsigned long long)t.xattrs);
	fprintf(f, "config       %s\n", m->hdr->config_len ? "yes" : "none");
}

int cmd_manifest(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "summary", no_argument, NULL, 'S' },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct manifest *m;
	char why[WHY_MAX] = "";
	bool summary = false;
	int c, ret;

	if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) {
		fputs(manifest_usage, stdout);
		return 0;
	}
	if (argc < 2 || strcmp(argv[1], "show"))
		return cli_usage_error("expected 'manifest show FILE' (see lazyblk manifest --help)");
	log_set_context("manifest show");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'S': summary = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(manifest_usage, stdout); return 0;
		default: return cli_bad_option("manifest", argv + 1, c);
		}
	}
	if (optind + 1 != argc - 1)
		return cli_usage_error("expected one manifest file (see lazyblk manifest --help)");
	const char *path = argv[1 + optind];

	ret = manifest_load(path, &m, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", path, why[0] ? why : strerror(-ret));
		return 1;
	}
	if (summary)
		show_summary(stdout, m);
	else
		show_json(stdout, m);
	manifest_free(m);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		log_error("writing output: %s", strerror(errno));
		return 1;
	}
	return 0;
}
