/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/log.h"
#include "../blkd/disk/disk.h"
#include "../cas/chunk.h"
#include "../cas/manifest.h"
#include "../cas/oci_config.h"
#include "../cas/source.h"
#include "../common/size.h"
#include "../common/why.h"
#include "cli.h"

int cli_usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s", msg);
	return EXIT_USAGE;
}

void cli_note(void *arg, enum note_kind kind, const char *line)
{
	(void)arg;
	switch (kind) {
	case NOTE_WARN: log_warn("%s", line); break;
	case NOTE_NOTICE:
		if (log_get_level() > 0)
			log_notice("%s", line);
		break;
	case NOTE_INFO: log_info("%s", line); break;
	case NOTE_DEBUG: log_debug("%s", line); break;
	}
}

int cli_fail(int err, const char *why)
{
	if (err && why[0])
		log_error("%s", why);
	return err;
}

int cli_output_check(const char *path)
{
	int ret = fs_output_check(path);

	if (ret == -EEXIST)
		log_error("%s: not a regular file (the output is written as a new file and renamed "
			  "into place: it never replaces a directory, a device, a FIFO or a socket)",
			  path);
	else if (ret)
		log_error("%s: %s", path, strerror(-ret));
	return ret ? 1 : 0;
}

int cli_bad_option(const char *cmd, char **argv, int c)
{
	const char *arg = optind > 0 ? argv[optind - 1] : "?";

	if (c == ':')
		return cli_usage_error("option '%s' needs an argument (see lazyblk %s --help)", arg,
				       cmd);
	if (optopt && c == '?' && arg[0] == '-' && arg[1] != '-')
		return cli_usage_error("unknown option '-%c' (see lazyblk %s --help)", optopt, cmd);
	return cli_usage_error("unknown option '%s' (see lazyblk %s --help)", arg, cmd);
}

void cli_log_option(int c)
{
	if (c == 'p' || c == CLI_O_NO_PROGRESS)
		log_set_progress(c == 'p');
	else
		log_set_level(c == 'q' ? 0 : log_get_level() + 1);
}

const char cli_remote_help[] =
	"      REF                 in place of IMAGE.layout, an image published by lazyblk push:\n"
	"                          oci://HOST[:PORT]/REPO:TAG (or REPO@sha256:DIGEST) or\n"
	"                          http(s)://HOST[:PORT]/PATH/images/NAME. Its layout files\n"
	"                          are fetched into DIR/layouts/ (each checked against its\n"
	"                          digest; a corrupt or truncated one is refused before\n"
	"                          anything is served) and its chunks come from that\n"
	"                          registry repository or store unless --remote says\n"
	"                          otherwise (see docs/images.md)\n"
	"      --remote URL        fetch missing chunks from URL, keeping them in the store:\n"
	"                          http(s)://HOST[:PORT]/PATH/ (a store served as static\n"
	"                          files) or oci://HOST[:PORT]/REPO[:TAG] (an OCI registry;\n"
	"                          see lazyblk push). Credentials: LAZYBLK_REMOTE_USER and\n"
	"                          LAZYBLK_REMOTE_PASSWORD\n"
	"      --cache-size BYTES  bound the store's chunks to BYTES, least recently used\n"
	"                          evicted first (needs --remote)\n"
	"      --fetch-concurrency N  remote requests at once (default 16)\n"
	"      --fetch-timeout SECS   per request attempt (default 30)\n"
	"      --fetch-retries N      retries of a request that timed out, was reset or got\n"
	"                          a 5xx, with exponential backoff (default 4)\n"
	"      --no-plain          neither use nor write plain copies of chunks (STORE/plain:\n"
	"                          their verified uncompressed bytes, shared through the page\n"
	"                          cache; see docs/formats.md)\n";

int cli_remote_option(struct cli_remote *r, int c, const char *arg)
{
	char *end;
	unsigned long v;
	uint64_t b;

	if (c == CLI_O_NO_PLAIN) {
		r->no_plain = true;
		return 1;
	}
	if (c < CLI_O_REMOTE || c > CLI_O_FETCH_RETRIES || !arg)
		return 0; /* not one of ours */
	switch (c) {
	case CLI_O_REMOTE:
		r->url = arg;
		return 1;
	case CLI_O_CACHE_SIZE:
		if (cli_parse_size("--cache-size", arg, 1, 1, UINT64_MAX, &b))
			return -1;
		r->cache_size = b;
		return 1;
	}
	errno = 0;
	v = strtoul(arg, &end, 10);
	switch (c) {
	case CLI_O_FETCH_CONC:
		if (errno || *end || arg[0] == '-' || v < 1 || v > 1024) {
			cli_usage_error("bad --fetch-concurrency '%s' (1 to 1024)", arg);
			return -1;
		}
		r->concurrency = (unsigned)v;
		return 1;
	case CLI_O_FETCH_TIMEOUT:
		if (errno || *end || arg[0] == '-' || v < 1 || v > 3600) {
			cli_usage_error("bad --fetch-timeout '%s' (1 to 3600 seconds)", arg);
			return -1;
		}
		r->timeout_ms = (unsigned)v * 1000;
		return 1;
	case CLI_O_FETCH_RETRIES:
		if (errno || *end || arg[0] == '-' || v > 100) {
			cli_usage_error("bad --fetch-retries '%s' (0 to 100)", arg);
			return -1;
		}
		r->retries = v ? (int)v : -1;
		return 1;
	}
	return 0;
}

int cli_image_config_load(const char *manifest, struct oci_config *cfg, bool *found)
{
	struct manifest *m;
	char why[WHY_MAX] = "";
	char cwhy[WHY_MAX] = "";
	int r = manifest_load(manifest, &m, why, sizeof(why));

	*found = false;
	if (r) {
		log_error("%s: %s", manifest, why[0] ? why : strerror(-r));
		return r;
	}
	if (m->hdr->config_len) {
		r = oci_config_parse(manifest_str(m, m->hdr->config_off), m->hdr->config_len, cfg,
				     cwhy, sizeof(cwhy));
		if (r)
			log_error("%s: %s", manifest, cwhy);
		else
			*found = true;
	}
	manifest_free(m);
	return r;
}

int cli_remote_check(const struct cli_remote *r)
{
	if (r->cache_size && !r->url)
		return cli_usage_error("--cache-size needs --remote");
	return 0;
}

void cli_remote_to_source(const struct cli_remote *r, struct cas_source_opts *so)
{
	so->remote_url = r->url;
	so->cache_size = r->cache_size;
	so->concurrency = r->concurrency;
	so->timeout_ms = r->timeout_ms;
	so->retries = r->retries;
	so->no_plain = r->no_plain;
}

int cli_write_stats_json(const struct disk *d, const char *path)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int ret = -ENOMEM;

	/* replaced whole (never written through a link planted at path), FS_DATA_MODE */
	if (f) {
		disk_stats(d, f, true);
		ret = fclose(f) ? -errno : 0;
	}
	if (!ret)
		ret = fs_write_file_atomic(path, buf, len, FS_DATA_MODE);
	free(buf);
	if (ret)
		log_error("--stats-json %s: %s", path,
			  ret == -EEXIST ? "not a regular file (not replaced)" : strerror(-ret));
	return ret;
}

/* A bound of a size option, short: "4K", "64M", "1T", else in bytes. */
static const char *size_bound(uint64_t v, char *buf, size_t len)
{
	static const char units[] = "KMGT";
	unsigned u = 0;

	while (v && !(v & 1023) && u < 4) {
		v >>= 10;
		u++;
	}
	if (u)
		snprintf(buf, len, "%llu%c", (unsigned long long)v, units[u - 1]);
	else
		snprintf(buf, len, "%llu byte%s", (unsigned long long)v, v == 1 ? "" : "s");
	return buf;
}

int cli_parse_size(const char *opt, const char *arg, uint64_t unit, uint64_t min, uint64_t max,
		   uint64_t *out)
{
	char lo[32], hi[32], range[80] = "";
	uint64_t v;

	if (!size_parse_unit(arg, unit, &v) && v >= min && v <= max) {
		*out = v;
		return 0;
	}
	if (max != UINT64_MAX)
		snprintf(range, sizeof(range), " from %s to %s", size_bound(min, lo, sizeof(lo)),
			 size_bound(max, hi, sizeof(hi)));
	else if (min)
		snprintf(range, sizeof(range), " of at least %s", size_bound(min, lo, sizeof(lo)));
	return cli_usage_error("%s: '%s' is not a size%s (a number with K, M, G or T: powers of "
			       "1024%s)", opt, arg, range,
			       unit == (1u << 20) ? "; without one, MiB" : "");
}

int cli_parse_chunk_size(const char *arg, uint32_t *out)
{
	uint64_t v;

	if (cli_parse_size("--chunk-size", arg, 1, CHUNK_SIZE_MIN, CHUNK_SIZE_MAX, &v))
		return EXIT_USAGE;
	*out = (uint32_t)v;
	return 0;
}

int cli_parse_level(const char *arg, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 1 || v > 19)
		return cli_usage_error("--level: '%s' is not 1..19", arg);
	*out = (int)v;
	return 0;
}
