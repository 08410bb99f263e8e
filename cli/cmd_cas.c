/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../cas/gc.h"
#include "../cas/repair.h"
#include "../cas/store.h"
#include "../cas/verify.h"
#include "../common/grow.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../ext4gen/refs.h"
#include "cli.h"

static const char cas_usage[] =
	"usage: lazyblk cas verify --store DIR [--repair --remote URL]\n"
	"       lazyblk cas stats --store DIR\n"
	"       lazyblk cas gc --store DIR --keep FILE [--keep FILE ...] [--grace SECONDS]\n"
	"                      [--dry-run]\n"
	"\n"
	"verify  decompress and re-hash every chunk; print each corrupt one as\n"
	"        'corrupt: HEX (reason)'; re-hash every plain copy (STORE/plain), print\n"
	"        each bad one as 'bad plain copy: HEX (reason)' and remove it; exit 1 if\n"
	"        there are any of either\n"
	"        --repair --remote URL: fetch each corrupt chunk from URL (a remote as\n"
	"        for serve: http(s)://… or oci://…), check it, and put it in place of\n"
	"        the bad one (atomically); print 'repaired: HEX' or 'still bad: HEX\n"
	"        (reason)' (the remote does not have it, or its copy is bad too) and\n"
	"        the counts; exit 0 only when nothing remains bad (bad plain copies,\n"
	"        removed, count as repaired)\n"
	"stats   chunk count, raw (uncompressed) bytes, stored bytes, plain copies\n"
	"gc      remove every chunk that no --keep file references and that is older\n"
	"        than the grace period (with its plain copy), plain copies older than\n"
	"        it whose chunk is gone, and stale staging files in STORE/tmp; every\n"
	"        --keep file is checked first, and nothing is removed if one is bad\n"
	"\n"
	"options:\n"
	"  -s, --store DIR      the chunk store\n"
	"  -k, --keep FILE      gc: a layout (lazyblk mkfs) or manifest (lazyblk import)\n"
	"                       whose chunks stay; repeat for each image to keep; at\n"
	"                       least one is required\n"
	"  -g, --grace SECONDS  gc: never remove a chunk modified less than SECONDS ago\n"
	"                       (default 3600), so chunks written by an import that is\n"
	"                       still running, whose manifest does not exist yet, stay\n"
	"  -n, --dry-run        gc: report what would be removed, remove nothing\n"
	"      --repair         verify: repair corrupt chunks from --remote (required)\n"
	"      --remote URL     verify --repair: where the good chunks are\n"
	"  -h, --help           this text\n";

/* cas verify --repair: the corrupt chunks found, to fetch again. */
struct repair_list {
	uint8_t (*d)[SHA256_LEN];
	size_t n, cap;
	bool oom;
};

static void report(void *arg, const char *hex, const char *why, bool plain)
{
	struct repair_list *rl = arg;

	printf("%s: %s (%s)\n", plain ? "bad plain copy" : "corrupt", hex, why);
	if (!rl || plain)
		return;
	if (!grow((void **)&rl->d, &rl->cap, rl->n + 1, sizeof(*rl->d)) ||
	    sha256_from_hex(hex, rl->d[rl->n]))
		rl->oom = true;
	else
		rl->n++;
}

/* Fetch every chunk of rl again from r; returns how many remain bad. */
static uint64_t repair_chunks(struct store *s, struct remote *r, struct repair_list *rl)
{
	char hex[SHA256_HEX_LEN + 1], why[512];
	uint64_t bad = 0;

	/*
	 * The remote says why a fetch failed (not found, unreachable) through the logger; each
	 * chunk's outcome is on stdout, so stderr keeps to the first line, as the rule is.
	 */
	log_first_error_only(true);
	for (size_t i = 0; i < rl->n; i++) {
		sha256_to_hex(rl->d[i], hex);
		if (cas_repair_chunk(s, r, rl->d[i], why, sizeof(why))) {
			printf("still bad: %s (%s)\n", hex, why);
			bad++;
		} else {
			printf("repaired: %s\n", hex);
		}
	}
	return bad;
}

static int parse_grace(const char *arg, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (arg[0] < '0' || arg[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(arg, &end, 10);
	if (errno || *end || v > INT64_MAX)
		return -EINVAL;
	*out = v;
	return 0;
}

static int run_gc(struct store *s, const char *store_dir, const char *const *keep, size_t n_keep,
		  uint64_t grace, bool dry_run)
{
	struct chunk_refs refs = { 0 };
	struct cas_gc_result res;
	char h1[32], h2[32], h3[32];
	int ret = 0;

	/* every keep file is read and checked before anything is removed */
	for (size_t i = 0; i < n_keep; i++) {
		const char *why = NULL;

		ret = chunk_refs_add_file(&refs, keep[i], &why);
		if (ret) {
			log_error("%s: %s; nothing removed", keep[i], why ? why : strerror(-ret));
			chunk_refs_free(&refs);
			return 1;
		}
	}
	chunk_refs_finish(&refs);
	ret = cas_gc(s, (const uint8_t (*)[SHA256_LEN])refs.d, refs.n, grace, dry_run, &res);
	chunk_refs_free(&refs);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	printf("gc: %s %llu chunk%s (%s), kept %llu (%s), %llu newer than the grace period "
	       "(%s)",
	       dry_run ? "would remove" : "removed", (unsigned long long)res.removed,
	       res.removed == 1 ? "" : "s", size_human(res.removed_bytes, h1, sizeof(h1)),
	       (unsigned long long)res.kept, size_human(res.kept_bytes, h2, sizeof(h2)),
	       (unsigned long long)res.young, size_human(res.young_bytes, h3, sizeof(h3)));
	if (res.plain_removed || res.plain_orphans)
		printf(", %llu plain cop%s (%s)",
		       (unsigned long long)(res.plain_removed + res.plain_orphans),
		       res.plain_removed + res.plain_orphans == 1 ? "y" : "ies",
		       size_human(res.plain_removed_bytes, h1, sizeof(h1)));
	if (res.tmp_removed)
		printf(", %llu stale tmp file%s", (unsigned long long)res.tmp_removed,
		       res.tmp_removed == 1 ? "" : "s");
	if (res.missing)
		printf(", %llu referenced chunk%s missing", (unsigned long long)res.missing,
		       res.missing == 1 ? "" : "s");
	putchar('\n');
	return 0;
}

/* lazyblk cas stats; closes s. */
static int run_stats(struct store *s, const char *store_dir)
{
	struct store_stats st;
	char h1[32], h2[32];
	int ret = store_stats(s, &st);

	store_close(s);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	printf("chunks        %llu\n", (unsigned long long)st.chunks);
	printf("raw bytes     %llu (%s)\n", (unsigned long long)st.raw_bytes,
	       size_human(st.raw_bytes, h1, sizeof(h1)));
	printf("stored bytes  %llu (%s)\n", (unsigned long long)st.stored_bytes,
	       size_human(st.stored_bytes, h2, sizeof(h2)));
	if (st.raw_bytes)
		printf("ratio         %.2f\n", (double)st.stored_bytes / (double)st.raw_bytes);
	if (st.bad_headers)
		printf("unreadable    %llu (run lazyblk cas verify)\n",
		       (unsigned long long)st.bad_headers);
	printf("plain copies  %llu (%llu bytes, %s)\n", (unsigned long long)st.plain_files,
	       (unsigned long long)st.plain_bytes, size_human(st.plain_bytes, h1, sizeof(h1)));
	return 0;
}

/* The summary of cas verify --repair: 0 when nothing remains bad. */
static int verify_repaired(const char *store_dir, const struct verify_result *res, uint64_t bad)
{
	printf("verified %llu chunks: %llu ok, %llu corrupt, %llu repaired, %llu still bad\n",
	       (unsigned long long)res->checked, (unsigned long long)res->ok,
	       (unsigned long long)res->corrupt, (unsigned long long)(res->corrupt - bad),
	       (unsigned long long)bad);
	printf("verified %llu plain copies: %llu ok, %llu bad (removed)\n",
	       (unsigned long long)res->plain_checked, (unsigned long long)res->plain_ok,
	       (unsigned long long)res->plain_bad);
	if (!bad)
		return 0;
	log_error("%llu corrupt chunk%s in %s not repaired", (unsigned long long)bad,
		  bad == 1 ? "" : "s", store_dir);
	return 1;
}

/* lazyblk cas verify [--repair --remote URL]; closes s. */
static int run_verify(struct store *s, const char *store_dir, const char *remote_url)
{
	struct remote_opts ro = { .url = remote_url };
	struct repair_list rl = { 0 };
	struct remote *r = NULL;
	struct verify_result res;
	const char *rwhy = NULL;
	uint64_t bad = 0;
	int ret;

	if (remote_url) { /* a bad URL fails before the walk */
		ret = remote_open(&ro, &r, &rwhy);
		if (ret) {
			store_close(s);
			log_error("%s: %s", remote_url, rwhy ? rwhy : strerror(-ret));
			return 1;
		}
	}
	ret = store_verify(s, report, r ? &rl : NULL, &res);
	if (!ret && rl.oom)
		ret = -ENOMEM;
	if (!ret && r)
		bad = repair_chunks(s, r, &rl);
	remote_close(r);
	store_close(s);
	free(rl.d);
	if (!ret && r)
		return verify_repaired(store_dir, &res, bad);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	printf("verified %llu chunks: %llu ok, %llu corrupt\n", (unsigned long long)res.checked,
	       (unsigned long long)res.ok, (unsigned long long)res.corrupt);
	printf("verified %llu plain copies: %llu ok, %llu bad (removed)\n",
	       (unsigned long long)res.plain_checked, (unsigned long long)res.plain_ok,
	       (unsigned long long)res.plain_bad);
	ret = 0;
	if (res.corrupt) {
		log_error("%llu corrupt chunk%s in %s", (unsigned long long)res.corrupt,
			  res.corrupt == 1 ? "" : "s", store_dir);
		ret = 1;
	}
	if (res.plain_bad) {
		log_error("%llu bad plain cop%s in %s (removed)", (unsigned long long)res.plain_bad,
			  res.plain_bad == 1 ? "y" : "ies", store_dir);
		ret = 1;
	}
	return ret;
}

int cmd_cas(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "keep", required_argument, NULL, 'k' },
		{ "grace", required_argument, NULL, 'g' },
		{ "dry-run", no_argument, NULL, 'n' },
		{ "repair", no_argument, NULL, 'R' },
		{ "remote", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *store_dir = NULL, *sub, **keep = NULL, *remote_url = NULL;
	char why[4096];
	uint64_t grace = 3600;
	size_t n_keep = 0;
	bool dry_run = false, repair = false, is_gc;
	struct store *s;
	int c, ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(cas_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	sub = argv[1];
	if (strcmp(sub, "verify") && strcmp(sub, "stats") && strcmp(sub, "gc"))
		return cli_usage_error("unknown cas command '%s' (see lazyblk cas --help)", sub);
	is_gc = !strcmp(sub, "gc");
	log_set_context(!strcmp(sub, "verify") ? "cas verify" : is_gc ? "cas gc" : "cas stats");
	/* at most one --keep per argument */
	keep = calloc((size_t)argc, sizeof(*keep));
	if (!keep) {
		log_error("%s", strerror(ENOMEM));
		return 1;
	}
	optind = 1;
	opterr = 0;
	ret = -1;
	while (ret < 0 && (c = getopt_long(argc - 1, argv + 1, ":s:k:g:nh", opts, NULL)) != -1) {
		if (!is_gc && (c == 'k' || c == 'g' || c == 'n')) {
			ret = cli_usage_error("--%s is only for cas gc",
					      c == 'k' ? "keep" : c == 'g' ? "grace" : "dry-run");
			break;
		}
		if (strcmp(sub, "verify") && (c == 'R' || c == 'r')) {
			ret = cli_usage_error("--%s is only for cas verify",
					      c == 'R' ? "repair" : "remote");
			break;
		}
		switch (c) {
		case 's': store_dir = optarg; break;
		case 'R': repair = true; break;
		case 'r': remote_url = optarg; break;
		case 'k': keep[n_keep++] = optarg; break;
		case 'g':
			if (parse_grace(optarg, &grace))
				ret = cli_usage_error("--grace: '%s' is not a number of seconds",
						      optarg);
			break;
		case 'n': dry_run = true; break;
		case 'h': fputs(cas_usage, stdout); ret = 0; break;
		default: ret = cli_bad_option("cas", argv + 1, c); break;
		}
	}
	if (ret >= 0)
		goto out;
	if (optind != argc - 1) {
		ret = cli_usage_error("unexpected argument '%s'", argv[1 + optind]);
		goto out;
	}
	if (!store_dir) {
		ret = cli_usage_error("missing --store DIR");
		goto out;
	}
	if (repair != !!remote_url) {
		ret = cli_usage_error(repair ? "--repair needs --remote URL (where the good chunks "
					       "are; every verify removes bad plain copies)"
					     : "--remote is only for --repair");
		goto out;
	}
	if (is_gc && !n_keep) {
		ret = cli_usage_error("missing --keep FILE (without one gc would remove every "
				      "chunk; see lazyblk cas --help)");
		goto out;
	}
	ret = store_open(store_dir, false, &s);
	if (ret && store_open_why(ret, store_dir, false, why, sizeof(why))) {
		log_error("%s", why);
		ret = 1;
		goto out;
	}
	if (ret) {
		log_error("%s: %s", store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		ret = 1;
		goto out;
	}
	if (is_gc) {
		ret = run_gc(s, store_dir, keep, n_keep, grace, dry_run);
		store_close(s);
		goto out;
	}
	ret = !strcmp(sub, "stats") ? run_stats(s, store_dir)
					      : run_verify(s, store_dir, remote_url);
out:
	free(keep);
	return ret;
}
