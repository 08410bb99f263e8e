/* SPDX-License-Identifier: MIT */
/* lazyblk trace show: a recorded boot trace, readable or as JSON. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../cas/trace.h"
#include "../common/esc.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char trace_usage[] =
	"usage: lazyblk trace show [--json] TRACE\n"
	"\n"
	"Print a trace recorded by serve or run --trace-record: its header (the image's manifest\n"
	"and layout digests, when and how long it was recorded, totals), then one line per\n"
	"record in the order the guest first read it:\n"
	"  TIME_MS  DISK_OFFSET+LENGTH  meta                    (metadata blocks)\n"
	"  TIME_MS  DISK_OFFSET+LENGTH  PATH FILE_OFFSET+LENGTH  (file data)\n"
	"  TIME_MS  RAM_OFFSET+LENGTH   ram                     (guest RAM, version 2)\n"
	"PATH shows control characters and bytes that are not UTF-8 as \\xHH and a backslash\n"
	"as \\\\ (the image chose its names); --json has them byte for byte.\n"
	"With --json, one JSON document: {\"version\", \"manifest\", \"layout\", \"snapshot\",\n"
	"\"created\", \"duration_us\", \"truncated\", \"records\": [{\"t_us\", \"disk_off\", \"len\",\n"
	"\"path\", \"file_off\", \"ram\"}]} (truncated: the recorder kept only its first 1048576\n"
	"ranges; path and file_off only for file data; \"ram\": true for guest RAM, whose\n"
	"disk_off is the RAM offset; snapshot: the VM snapshot's id, version 2).\n"
	"\n"
	"options:\n"
	"  --json      JSON instead of text\n"
	"  -h, --help  this text\n";

struct trace_totals {
	uint64_t meta, data, ram;
	size_t files;
};

static void totals(const struct trace *t, struct trace_totals *s)
{
	uint32_t last = 0;

	memset(s, 0, sizeof(*s));
	for (size_t i = 0; i < t->n_records; i++) {
		const struct trace_record *r = &t->records[i];

		if (trace_record_is_ram(r)) {
			s->ram += r->len;
			continue;
		}
		if (!r->path) {
			s->meta += r->len;
			continue;
		}
		s->data += r->len;
		if (trace_record_new_file(r, &last))
			s->files++;
	}
}

static void show_json(FILE *f, const struct trace *t)
{
	char hex[SHA256_HEX_LEN + 1];

	fprintf(f, "{\"version\":%u", t->hdr->version);
	sha256_to_hex(t->hdr->manifest_digest, hex);
	fprintf(f, ",\"manifest\":\"%s\"", hex);
	sha256_to_hex(t->hdr->layout_digest, hex);
	fprintf(f, ",\"layout\":\"%s\"", hex);
	sha256_to_hex(t->hdr->snapshot_id, hex);
	fprintf(f, ",\"snapshot\":\"%s\"", hex);
	fprintf(f, ",\"created\":%llu,\"duration_us\":%llu,\"truncated\":%s,\"records\":[",
		(unsigned long long)t->hdr->created, (unsigned long long)t->hdr->duration_us,
		t->hdr->flags & TRACE_F_TRUNCATED ? "true" : "false");
	for (size_t i = 0; i < t->n_records; i++) {
		const struct trace_record *r = &t->records[i];

		fprintf(f, "%s{\"t_us\":%llu,\"disk_off\":%llu,\"len\":%u", i ? "," : "",
			(unsigned long long)r->t_us, (unsigned long long)r->disk_off, r->len);
		if (trace_record_is_ram(r)) {
			fputs(",\"ram\":true", f);
		} else if (r->path) {
			const char *p = trace_path(t, r);

			fputc(',', f);
			json_write_field_bytes(f, "path", p, strlen(p));
			fprintf(f, ",\"file_off\":%llu", (unsigned long long)r->file_off);
		}
		fputc('}', f);
	}
	fputs("]}\n", f);
}

static void show_text(FILE *f, const struct trace *t)
{
	char hex[SHA256_HEX_LEN + 1], a[32], b[32], when[64], path[ESC_LEN(PATH_MAX)];
	struct trace_totals s;
	time_t c = (time_t)t->hdr->created;
	struct tm tm;

	totals(t, &s);
	sha256_to_hex(t->hdr->manifest_digest, hex);
	fprintf(f, "manifest  %s\n", hex);
	sha256_to_hex(t->hdr->layout_digest, hex);
	fprintf(f, "layout    %s\n", hex);
	if (t->hdr->version >= TRACE_VERSION) {
		sha256_to_hex(t->hdr->snapshot_id, hex);
		fprintf(f, "snapshot  %s\n", hex);
	}
	if (!gmtime_r(&c, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm))
		snprintf(when, sizeof(when), "%llu s since the epoch",
			 (unsigned long long)t->hdr->created);
	fprintf(f, "recorded  %s, for %.1f s%s\n", when, t->hdr->duration_us / 1e6,
		t->hdr->flags & TRACE_F_TRUNCATED ? " (truncated: only the first 1048576 ranges "
						    "first read were kept)" : "");
	fprintf(f, "records   %zu: %s of file data in %zu files, %s of metadata\n", t->n_records,
		size_human(s.data, a, sizeof(a)), s.files, size_human(s.meta, b, sizeof(b)));
	if (s.ram)
		fprintf(f, "ram       %s of guest RAM\n", size_human(s.ram, a, sizeof(a)));
	for (size_t i = 0; i < t->n_records; i++) {
		const struct trace_record *r = &t->records[i];

		fprintf(f, "%10.3f  %llu+%u  ", r->t_us / 1e3, (unsigned long long)r->disk_off,
			r->len);
		if (trace_record_is_ram(r))
			fputs("ram\n", f);
		else if (r->path)
			fprintf(f, "%s %llu+%u\n", esc_str(trace_path(t, r), path, sizeof(path)),
				(unsigned long long)r->file_off, r->len);
		else
			fputs("meta\n", f);
	}
}

int cmd_trace(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	char why[WHY_MAX] = "";
	struct trace *t;
	bool json = false;
	int c, ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		if (argc < 2)
			return cli_usage_error("missing 'show' (see lazyblk trace --help)");
		fputs(trace_usage, stdout);
		return 0;
	}
	if (strcmp(argv[1], "show"))
		return cli_usage_error("unknown trace command '%s' (want show)", argv[1]);
	optind = 2;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 'j': json = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(trace_usage, stdout); return 0;
		default: return cli_bad_option("trace show", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing TRACE (see lazyblk trace --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	ret = trace_load(argv[optind], &t, why, sizeof(why));
	if (ret) {
		log_error("%s: %s", argv[optind], why[0] ? why : strerror(-ret));
		return 1;
	}
	if (json)
		show_json(stdout, t);
	else
		show_text(stdout, t);
	trace_free(t);
	return fflush(stdout) ? 1 : 0;
}
