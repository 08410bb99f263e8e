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
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/refs.h"
#include "cli.h"

static const char cas_usage[] =
	"usage: lazyblk cas verify --store DIR [--repair --remote URL] [--json]\n"
	"       lazyblk cas stats --store DIR [--json]\n"
	"       lazyblk cas gc --store DIR [--keep FILE|REF ...] [--grace SECONDS] [--dry-run]\n"
	"       lazyblk cas gc --remote oci://HOST/REPO[:TAG]|http(s)://HOST/PATH/\n"
	"              [--keep FILE|REF ...] [--store DIR] [--grace SECONDS] [--dry-run]\n"
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
	"gc      remove the temporary files in STORE/tmp and STORE/layouts that\n"
	"        interrupted or killed writers left (older than the grace period); with\n"
	"        --keep, also every chunk that no --keep file references and that is\n"
	"        older than the grace period (with its plain copy), plain copies older\n"
	"        than it whose chunk is gone, and the files of images fetched by\n"
	"        reference (STORE/layouts) that no --keep chain uses, older than it;\n"
	"        every --keep file is checked first, and nothing is removed if one is bad\n"
	"        --remote oci://HOST/REPO[:TAG]: rewrite the repository's chunk index\n"
	"        (TAG, default lazyblk-chunks) to the chunks its image and VM snapshot\n"
	"        tags (lazyblk push by tag) and the --keep files use, print each chunk it\n"
	"        drops ('dropped: HEX (blob ...)'), and delete the old index's manifests\n"
	"        that no other tag references: the registry's own garbage collection\n"
	"        (docker-registry garbage-collect) then removes the blobs only they held; a\n"
	"        TAG that holds an image, a VM snapshot (or a container image) is refused,\n"
	"        and so is one that changed while gc ran; no manifest is deleted unless the\n"
	"        tag list (every page) was seen whole\n"
	"        --remote http(s)://HOST/PATH/: delete (HTTP DELETE) every chunk, layout,\n"
	"        manifest and snapshot document of the store that no image or VM snapshot\n"
	"        of it (PATH/images/NAME/, and the names of PATH/images/index.json) and no\n"
	"        --keep uses and that was uploaded more than the grace period ago (the\n"
	"        server's listing says when), printing each ('deleted: chunks/ab/HEX (N\n"
	"        bytes)'); the server must list directories as JSON (nginx:\n"
	"        autoindex_format json), leases/ too; a push to the store under way stops\n"
	"        it (exit 1, nothing removed), before it starts and again before it\n"
	"        deletes; a push started meanwhile waits for it\n"
	"\n"
	"options:\n"
	"  -s, --store DIR      the chunk store\n"
	"  -k, --keep FILE|REF  gc: a layout (lazyblk mkfs) or manifest (lazyblk import)\n"
	"                       whose chunks stay, or an image by reference (oci://… or\n"
	"                       http(s)://…/images/NAME: every layout of its chain is\n"
	"                       fetched into STORE/layouts/), or a VM snapshot (its\n"
	"                       directory or snapshot.json, or by reference: its RAM's\n"
	"                       chunks, its disk's chain and chunks stay); repeat for each\n"
	"                       to keep; without one, gc removes temporary files only\n"
	"  -g, --grace SECONDS  gc: never remove a chunk, a fetched layout or a temporary\n"
	"                       file modified less than SECONDS ago (default: 3600 for\n"
	"                       chunks and layouts, 600 for temporary files), so what an\n"
	"                       import or a fetch that is still running has written\n"
	"                       stays; with --remote http(s)://, never delete a file\n"
	"                       uploaded less than SECONDS ago (default 3600)\n"
	"  -n, --dry-run        gc: report what would be removed, remove nothing\n"
	"      --repair         verify: repair corrupt chunks from --remote (required)\n"
	"      --remote URL     verify --repair: where the good chunks are; gc: the\n"
	"                       registry repository or http(s) store to collect\n"
	"      --json           stats, verify: print the summary as one JSON object\n"
	"                       (stats: chunks, raw_bytes, stored_bytes, bad_headers,\n"
	"                       plain_files, plain_bytes; verify: checked, ok, corrupt,\n"
	"                       plain_checked, plain_ok, plain_bad, and bad: a list of\n"
	"                       {digest, plain, reason}; with --repair also repaired\n"
	"                       and still_bad); the exit status is the same\n"
	"  -h, --help           this text\n"
	"\n"
	"On a terminal, verify and gc show a progress line.\n";

/* What cas verify collects: the JSON list of bad ones (--json), the corrupt chunks to fetch
 * again (--repair). */
struct verify_ctx {
	struct json_buf *bad;          /* NULL: print each bad one */
	bool collect;                  /* --repair: keep the corrupt chunks' digests */
	uint8_t (*d)[SHA256_LEN];
	size_t n, cap;
	bool oom;
};

static void report(void *arg, const char *hex, const char *why, bool plain)
{
	struct verify_ctx *vc = arg;
	struct json_buf *bad = vc->bad;

	if (!bad) {
		printf("%s: %s (%s)\n", plain ? "bad plain copy" : "corrupt", hex, why);
	} else {
		json_buf_puts(bad, bad->len ? ",{" : "{");
		json_buf_printf(bad, "\"digest\":\"sha256:%s\"", hex);
		json_field_bool(bad, "plain", plain);
		json_field_bytes(bad, "reason", why, strlen(why));
		json_buf_puts(bad, "}");
	}
	if (!vc->collect || plain)
		return;
	if (!grow((void **)&vc->d, &vc->cap, vc->n + 1, sizeof(*vc->d)) ||
	    sha256_from_hex(hex, vc->d[vc->n]))
		vc->oom = true;
	else
		vc->n++;
}

/* Fetch every corrupt chunk again from r (printing each outcome unless quiet); how many
 * remain bad. */
static uint64_t repair_chunks(struct store *s, struct remote *r, struct verify_ctx *vc,
			      bool quiet)
{
	char hex[SHA256_HEX_LEN + 1], why[512];
	uint64_t bad = 0;

	/*
	 * The remote says why a fetch failed (not found, unreachable) through the logger; each
	 * chunk's outcome is on stdout, so stderr keeps to the first line, as the rule is.
	 */
	log_first_error_only(true);
	for (size_t i = 0; i < vc->n; i++) {
		sha256_to_hex(vc->d[i], hex);
		if (cas_repair_chunk(s, r, vc->d[i], why, sizeof(why))) {
			if (!quiet)
				printf("still bad: %s (%s)\n", hex, why);
			bad++;
		} else if (!quiet) {
			printf("repaired: %s\n", hex);
		}
	}
	return bad;
}

/* The progress line of gc and verify (arg: what it is doing). */
static void walk_progress(void *arg, uint64_t done, uint64_t total)
{
	if (log_progress_due())
		log_progress("%s: %llu%% (%llu of %llu chunks and plain copies)", (const char *)arg,
			     (unsigned long long)(total ? done * 100 / total : 100),
			     (unsigned long long)done, (unsigned long long)total);
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

/* ", N stale temporary files (SIZE), M newer than the grace period (SIZE)", what there is. */
static void print_tmp(const struct cas_gc_result *res, bool alone)
{
	char h1[32], h2[32];

	if (res->tmp_removed || alone)
		printf("%s%llu stale temporary file%s (%s)", alone ? "" : ", ",
		       (unsigned long long)res->tmp_removed, res->tmp_removed == 1 ? "" : "s",
		       size_human(res->tmp_bytes, h1, sizeof(h1)));
	if (res->tmp_young)
		printf(", %llu temporary file%s newer than the grace period (%s)",
		       (unsigned long long)res->tmp_young, res->tmp_young == 1 ? "" : "s",
		       size_human(res->tmp_young_bytes, h2, sizeof(h2)));
}

/* Without keep files: the temporaries only. */
static int run_gc(struct store *s, const char *store_dir, const char *const *keep, size_t n_keep,
		  uint64_t grace, uint64_t tmp_grace, bool dry_run)
{
	struct chunk_refs refs = { 0 };
	struct cas_walk_progress prog = { walk_progress, (void *)"collecting", 0, 0 };
	struct cas_gc_result res = { 0 };
	char h1[32], h2[32], h3[32];
	int ret = 0;

	/* every keep file is read and checked before anything is removed */
	for (size_t i = 0; i < n_keep; i++) {
		if (cli_keep_add(&refs, keep[i], store_dir)) {
			chunk_refs_free(&refs);
			return 1;
		}
	}
	chunk_refs_finish(&refs);
	if (n_keep) {
		ret = cas_gc(s, (const uint8_t (*)[SHA256_LEN])refs.d, refs.n, grace, dry_run,
			     log_progress_enabled() ? &prog : NULL, &res);
		log_progress_done();
		if (!ret)
			ret = cas_gc_layouts(s, (const uint8_t (*)[SHA256_LEN])refs.layouts,
					     refs.n_layouts, grace, dry_run, &res);
	}
	chunk_refs_free(&refs);
	if (!ret)
		ret = cas_gc_tmp(s, tmp_grace, dry_run, &res);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	printf("gc: %s ", dry_run ? "would remove" : "removed");
	if (!n_keep) {
		print_tmp(&res, true);
		printf("; chunks only with --keep\n");
		return 0;
	}
	printf("%llu chunk%s (%s), kept %llu (%s), %llu newer than the grace period (%s)",
	       (unsigned long long)res.removed,
	       res.removed == 1 ? "" : "s", size_human(res.removed_bytes, h1, sizeof(h1)),
	       (unsigned long long)res.kept, size_human(res.kept_bytes, h2, sizeof(h2)),
	       (unsigned long long)res.young, size_human(res.young_bytes, h3, sizeof(h3)));
	if (res.plain_removed || res.plain_orphans)
		printf(", %llu plain cop%s (%s)",
		       (unsigned long long)(res.plain_removed + res.plain_orphans),
		       res.plain_removed + res.plain_orphans == 1 ? "y" : "ies",
		       size_human(res.plain_removed_bytes, h1, sizeof(h1)));
	if (res.layouts_removed)
		printf(", %llu file%s of %s/layouts (%s)", (unsigned long long)res.layouts_removed,
		       res.layouts_removed == 1 ? "" : "s", store_dir,
		       size_human(res.layouts_removed_bytes, h1, sizeof(h1)));
	print_tmp(&res, false);
	if (res.missing)
		printf(", %llu referenced chunk%s missing", (unsigned long long)res.missing,
		       res.missing == 1 ? "" : "s");
	putchar('\n');
	return 0;
}

/* lazyblk cas stats; closes s. */
static int run_stats(struct store *s, const char *store_dir, bool json)
{
	struct json_buf b = { 0 };
	struct store_stats st;
	char h1[32], h2[32];
	int ret = store_stats(s, &st);

	store_close(s);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	if (json) {
		json_buf_puts(&b, "{");
		json_field_u64(&b, "chunks", st.chunks);
		json_field_u64(&b, "raw_bytes", st.raw_bytes);
		json_field_u64(&b, "stored_bytes", st.stored_bytes);
		json_field_u64(&b, "bad_headers", st.bad_headers);
		json_field_u64(&b, "plain_files", st.plain_files);
		json_field_u64(&b, "plain_bytes", st.plain_bytes);
		json_buf_puts(&b, "}");
		return cli_json_print(&b);
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

/* --json of verify: the counts, and bad, the list report() built; with --repair (repaired
 * >= 0) what was repaired and what remains bad. */
static int verify_json(const struct verify_result *res, struct json_buf *bad, int64_t still_bad)
{
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	json_field_u64(&b, "checked", res->checked);
	json_field_u64(&b, "ok", res->ok);
	json_field_u64(&b, "corrupt", res->corrupt);
	json_field_u64(&b, "plain_checked", res->plain_checked);
	json_field_u64(&b, "plain_ok", res->plain_ok);
	json_field_u64(&b, "plain_bad", res->plain_bad);
	if (still_bad >= 0) {
		json_field_u64(&b, "repaired", res->corrupt - (uint64_t)still_bad);
		json_field_u64(&b, "still_bad", (uint64_t)still_bad);
	}
	json_buf_puts(&b, ",\"bad\":[");
	if (bad->p)
		json_buf_puts(&b, bad->p);
	json_buf_puts(&b, "]}");
	if (bad->err)
		b.err = bad->err;
	json_buf_free(bad);
	return cli_json_print(&b);
}

/* The text summary of verify (still_bad < 0: no --repair) and its one error line: the exit
 * status. */
static int verify_text(const char *store_dir, const struct verify_result *res, int64_t still_bad,
		       bool json)
{
	uint64_t corrupt = still_bad >= 0 ? (uint64_t)still_bad : res->corrupt;
	uint64_t plain = still_bad >= 0 ? 0 : res->plain_bad;

	if (!json && still_bad >= 0)
		printf("verified %llu chunks: %llu ok, %llu corrupt, %llu repaired, %llu still bad\n",
		       (unsigned long long)res->checked, (unsigned long long)res->ok,
		       (unsigned long long)res->corrupt,
		       (unsigned long long)(res->corrupt - (uint64_t)still_bad),
		       (unsigned long long)still_bad);
	else if (!json)
		printf("verified %llu chunks: %llu ok, %llu corrupt\n",
		       (unsigned long long)res->checked, (unsigned long long)res->ok,
		       (unsigned long long)res->corrupt);
	if (!json)
		printf("verified %llu plain copies: %llu ok, %llu bad (removed)\n",
		       (unsigned long long)res->plain_checked, (unsigned long long)res->plain_ok,
		       (unsigned long long)res->plain_bad);
	if (corrupt && plain)
		log_error("%llu corrupt chunk%s and %llu bad plain cop%s (removed) in %s",
			  (unsigned long long)corrupt, corrupt == 1 ? "" : "s",
			  (unsigned long long)plain, plain == 1 ? "y" : "ies", store_dir);
	else if (corrupt)
		log_error("%llu corrupt chunk%s in %s%s", (unsigned long long)corrupt,
			  corrupt == 1 ? "" : "s", store_dir, still_bad >= 0 ? " not repaired" : "");
	else if (plain)
		log_error("%llu bad plain cop%s in %s (removed)", (unsigned long long)plain,
			  plain == 1 ? "y" : "ies", store_dir);
	return corrupt || plain;
}

/* lazyblk cas verify [--repair --remote URL] [--json]; closes s. */
static int run_verify(struct store *s, const char *store_dir, const char *remote_url, bool json)
{
	struct cas_walk_progress prog = { walk_progress, (void *)"verifying", 0, 0 };
	struct json_buf bad = { 0 };
	struct verify_ctx vc = { .bad = json ? &bad : NULL, .collect = remote_url != NULL };
	struct remote_opts ro = { .url = remote_url };
	struct remote *r = NULL;
	struct verify_result res;
	char rwhy[WHY_MAX] = "";
	int64_t still_bad = -1;
	int ret;

	if (remote_url) { /* a bad URL fails before the walk */
		ret = remote_open(&ro, &r, rwhy, sizeof(rwhy));
		if (ret) {
			store_close(s);
			log_error("%s: %s", remote_url, rwhy[0] ? rwhy : strerror(-ret));
			return 1;
		}
	}
	ret = store_verify(s, report, &vc, log_progress_enabled() ? &prog : NULL, &res);
	log_progress_done();
	if (!ret && vc.oom)
		ret = -ENOMEM;
	if (!ret && r)
		still_bad = (int64_t)repair_chunks(s, r, &vc, json);
	remote_close(r);
	store_close(s);
	free(vc.d);
	if (ret) {
		json_buf_free(&bad);
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	if (json && verify_json(&res, &bad, still_bad))
		return 1;
	return verify_text(store_dir, &res, still_bad, json);
}

/* What the command line of `lazyblk cas SUB` asks for. */
struct cas_args {
	const char *sub, *store_dir, *remote_url;
	const char **keep;        /* argc slots: at most one --keep per argument */
	size_t n_keep;
	uint64_t grace, tmp_grace;
	bool dry_run, json, repair, is_gc;
};

/* The options after SUB into a: -1 when they are all good, else the exit status. */
static int cas_parse(int argc, char **argv, struct cas_args *a)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "keep", required_argument, NULL, 'k' },
		{ "grace", required_argument, NULL, 'g' },
		{ "dry-run", no_argument, NULL, 'n' },
		CLI_LOG_OPTIONS,
		{ "json", no_argument, NULL, 'J' },
		{ "repair", no_argument, NULL, 'R' },
		{ "remote", required_argument, NULL, 'r' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	int c, ret = -1;

	optind = 1;
	opterr = 0;
	while (ret < 0 && (c = getopt_long(argc - 1, argv + 1, ":s:k:g:nhvqp", opts, NULL)) != -1) {
		if (!a->is_gc && (c == 'k' || c == 'g' || c == 'n'))
			return cli_usage_error("--%s is only for cas gc",
					       c == 'k' ? "keep" : c == 'g' ? "grace" : "dry-run");
		if (a->is_gc && c == 'J')
			return cli_usage_error("--json is for cas stats and cas verify");
		if (strcmp(a->sub, "verify") && (c == 'R' || (c == 'r' && !a->is_gc)))
			return cli_usage_error("--%s is only for cas verify",
					       c == 'R' ? "repair" : "remote");
		switch (c) {
		case 's': a->store_dir = optarg; break;
		case 'k': a->keep[a->n_keep++] = optarg; break;
		case 'J': a->json = true; break;
		case 'R': a->repair = true; break;
		case 'r': a->remote_url = optarg; break;
		case 'g':
			if (parse_grace(optarg, &a->grace))
				ret = cli_usage_error("--grace: '%s' is not a number of seconds",
						      optarg);
			a->tmp_grace = a->grace;
			break;
		case 'n': a->dry_run = true; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': fputs(cas_usage, stdout); ret = 0; break;
		default: ret = cli_bad_option("cas", argv + 1, c); break;
		}
	}
	if (ret < 0 && optind != argc - 1)
		ret = cli_usage_error("unexpected argument '%s'", argv[1 + optind]);
	return ret;
}

/* The store named by a, opened for a local stats, verify or gc: the exit status. */
static int cas_local(const struct cas_args *a)
{
	struct store *s;
	char why[4096];
	int ret;

	if (!a->store_dir)
		return cli_usage_error("missing --store DIR");
	if (a->repair != !!a->remote_url)
		return cli_usage_error(a->repair ? "--repair needs --remote URL (where the good "
						   "chunks are; every verify removes bad plain "
						   "copies)"
						 : "--remote is only for --repair");
	ret = store_open(a->store_dir, false, &s);
	if (ret && store_open_why(ret, a->store_dir, false, why, sizeof(why))) {
		log_error("%s", why);
		return 1;
	}
	if (ret) {
		log_error("%s: %s", a->store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		return 1;
	}
	if (a->is_gc) {
		ret = run_gc(s, a->store_dir, a->keep, a->n_keep, a->grace, a->tmp_grace,
			     a->dry_run);
		store_close(s);
		return ret;
	}
	return !strcmp(a->sub, "stats") ? run_stats(s, a->store_dir, a->json)
					: run_verify(s, a->store_dir, a->remote_url, a->json);
}

int cmd_cas(int argc, char **argv)
{
	struct cas_args a = { .grace = 3600, .tmp_grace = STORE_TMP_GRACE_SECS };
	int ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(cas_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	a.sub = argv[1];
	if (strcmp(a.sub, "verify") && strcmp(a.sub, "stats") && strcmp(a.sub, "gc"))
		return cli_usage_error("unknown cas command '%s' (see lazyblk cas --help)", a.sub);
	a.is_gc = !strcmp(a.sub, "gc");
	log_set_context(!strcmp(a.sub, "verify") ? "cas verify" : a.is_gc ? "cas gc" : "cas stats");
	a.keep = calloc((size_t)argc, sizeof(*a.keep));
	if (!a.keep) {
		log_error("%s", strerror(ENOMEM));
		return 1;
	}
	ret = cas_parse(argc, argv, &a);
	if (ret < 0 && a.is_gc && a.remote_url)
		ret = cli_cas_gc_remote(a.remote_url, a.keep, a.n_keep, a.store_dir, a.grace,
					a.dry_run);
	else if (ret < 0)
		ret = cas_local(&a);
	free(a.keep);
	return ret;
}
