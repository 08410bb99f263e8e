/* SPDX-License-Identifier: MIT */
/*
 * lazyblk warm: fill the cache with an image's boot set (a trace's chunks, in its order) or
 * with all of it, before it boots. SIGINT/SIGTERM stop it between chunks: what was fetched
 * stays (each chunk is committed atomically), and running it again resumes.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../blkd/coldstart/warm.h"
#include "../common/clock.h"
#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char warm_usage[] =
	"usage: lazyblk warm IMAGE.layout|REF (--trace TRACE | --all | --trace TRACE --all)\n"
	"                    --store DIR [--remote URL [--cache-size BYTES]] [--json]\n"
	"                    [--manifest IMAGE.manifest]\n"
	"\n"
	"Fetch an image's chunks into the store before it is served: the chunks a recorded\n"
	"trace read (serve or run --trace-record), in the order it read them, then with --all\n"
	"every other chunk. Each chunk is verified against its sha256 and committed to the store\n"
	"atomically, so Ctrl-C (or SIGTERM) leaves a consistent cache, and running warm again\n"
	"fetches only what is still missing. Under --cache-size, warm stops before the cache\n"
	"would have to evict anything. A progress line is shown on a terminal.\n"
	"\n"
	"options:\n"
	"      --trace TRACE       the chunks this trace read, first (a trace of an older\n"
	"                          version of the image counts for the files that still exist;\n"
	"                          one of another image is refused)\n"
	"      --all               every chunk of the image (after the trace's)\n"
	"  -s, --store DIR         the store to fill (with --remote: the cache, created if\n"
	"                          missing)\n"
	"      --manifest FILE     the image's manifest (default: IMAGE.manifest beside\n"
	"                          IMAGE.layout); needed with --trace\n"
	"      --json              print the result as one JSON object\n"
	"%s"
	"  -h, --help              this text\n"
	"\n"
	"Exit status: 0 when every planned chunk is in the store (or warm stopped at the cache\n"
	"bound, said on stderr), 1 if some could not be fetched, 130 when interrupted.\n";

static void progress(struct blkd_prefetch *p, const struct timespec *t0)
{
	struct blkd_prefetch_stats st;
	char b[32];
	double s = clock_ms_since(t0) / 1e3;

	if (!log_progress_due())
		return;
	blkd_prefetch_get_stats(p, &st);
	log_progress("warming: %llu of %llu chunks (%llu%%), %s fetched, %.1f s",
		     (unsigned long long)st.done, (unsigned long long)st.planned,
		     (unsigned long long)(st.planned ? st.done * 100 / st.planned : 100),
		     size_human(st.fetched_bytes, b, sizeof(b)), s);
}

/* Run until the plan is walked or a signal comes; 1 if a signal stopped it. */
static int warm_wait(struct blkd_prefetch *p, const sigset_t *set, const struct timespec *t0)
{
	const struct timespec tick = { .tv_nsec = 100 * 1000000L };
	struct blkd_prefetch_stats st;

	if (log_progress_enabled())
		progress(p, t0); /* at once: a short warm shows its line too */
	for (blkd_prefetch_get_stats(p, &st); !st.finished; blkd_prefetch_get_stats(p, &st)) {
		int sig = sigtimedwait(set, NULL, &tick);

		if (sig == SIGINT || sig == SIGTERM) {
			blkd_prefetch_stop(p);
			return 1;
		}
		if (log_progress_enabled())
			progress(p, t0);
	}
	return 0;
}

static void report(const struct blkd_prefetch_stats *st, bool json, bool stopped, double secs,
		   uint64_t files, uint64_t found, bool traced)
{
	char b[32];

	if (json) {
		struct json_buf j = { 0 };

		json_buf_puts(&j, "{");
		json_field_u64(&j, "planned", st->planned);
		json_field_u64(&j, "done", st->done);
		json_field_u64(&j, "fetched", st->fetched);
		json_field_u64(&j, "fetched_bytes", st->fetched_bytes);
		json_field_u64(&j, "present", st->present);
		json_field_u64(&j, "failed", st->failed);
		json_field_bool(&j, "cache_full", st->cache_full);
		json_field_bool(&j, "interrupted", stopped);
		json_field_fixed(&j, "seconds", secs, 3);
		json_field_u64(&j, "trace_files", files);
		json_field_u64(&j, "trace_files_found", found);
		json_buf_puts(&j, "}\n");
		if (j.p)
			fputs(j.p, stdout);
		json_buf_free(&j);
		return;
	}
	printf("warmed %llu of %llu chunks in %.1f s: %llu fetched (%s), %llu there already, "
	       "%llu failed\n", (unsigned long long)st->done, (unsigned long long)st->planned, secs,
	       (unsigned long long)st->fetched, size_human(st->fetched_bytes, b, sizeof(b)),
	       (unsigned long long)st->present, (unsigned long long)st->failed);
	if (traced)
		printf("trace: %llu of the %llu files it read are in this image\n",
		       (unsigned long long)found, (unsigned long long)files);
}

static int warm_run(struct blkd_warm_opts *o, bool json)
{
	struct blkd_prefetch_stats st;
	struct blkd_warm *w;
	struct timespec t0;
	uint64_t files, found;
	char why[PATH_MAX + 256];
	sigset_t set;
	int stopped, rc = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL); /* before any thread: all inherit it */
	if (blkd_warm_start(o, &w, why, sizeof(why)))
		return cli_fail(1, why);
	stopped = warm_wait(blkd_warm_prefetch(w), &set, &t0);
	log_progress_done();
	blkd_prefetch_get_stats(blkd_warm_prefetch(w), &st);
	blkd_warm_files(w, &files, &found);
	report(&st, json, stopped, clock_ms_since(&t0) / 1e3, files, found, o->trace_path);
	fflush(stdout);
	if (stopped) {
		log_error("interrupted after %llu of %llu chunks: the store is consistent; run warm "
			  "again to go on", (unsigned long long)st.done,
			  (unsigned long long)st.planned);
		rc = 130;
	} else if (st.failed) {
		log_error("%llu chunks could not be fetched (see above)",
			  (unsigned long long)st.failed);
		rc = 1;
	} else if (st.cache_full) {
		log_warn("stopped at the cache bound (--cache-size) after %llu of %llu chunks",
			 (unsigned long long)st.done, (unsigned long long)st.planned);
	}
	blkd_warm_free(w);
	return rc;
}

int cmd_warm(int argc, char **argv)
{
	enum { O_TRACE = 256, O_ALL, O_JSON, O_MANIFEST };
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "trace", required_argument, NULL, O_TRACE },
		{ "all", no_argument, NULL, O_ALL },
		{ "json", no_argument, NULL, O_JSON },
		{ "manifest", required_argument, NULL, O_MANIFEST },
		CLI_REMOTE_OPTIONS,
		CLI_LOG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct blkd_warm_opts o = { 0 };
	struct cli_remote rem = { 0 };
	struct cli_image img;
	struct cli_trace tr = { 0 };
	bool json = false;
	int c, r;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:hvqp", opts, NULL)) != -1) {
		switch (c) {
		case 's': o.src.store_dir = optarg; break;
		case O_TRACE: tr.prefetch = optarg; break;
		case O_ALL: o.all = true; break;
		case O_JSON: json = true; break;
		case O_MANIFEST: tr.manifest = optarg; break;
		CLI_LOG_CASES: cli_log_option(c); break;
		case 'h': printf(warm_usage, cli_remote_help); return 0;
		default:
			r = cli_remote_option(&rem, c, optarg);
			if (r < 0)
				return EXIT_USAGE;
			if (!r)
				return cli_bad_option("warm", argv, c);
		}
	}
	if (optind >= argc)
		return cli_usage_error("missing IMAGE.layout (see lazyblk warm --help)");
	if (optind + 1 < argc)
		return cli_usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (!o.src.store_dir)
		return cli_usage_error("missing --store DIR");
	if (!tr.prefetch && !o.all)
		return cli_usage_error("missing --trace TRACE or --all (what to fetch)");
	if (cli_image_resolve(argv[optind], o.src.store_dir, &rem, &img, &o.layout_path))
		return 1;
	o.layout_fetched = img.f != NULL;
	r = EXIT_USAGE;
	if (cli_remote_check(&rem))
		goto out;
	cli_remote_to_source(&rem, &o.src);
	if (tr.prefetch && cli_trace_manifest(&tr, o.layout_path, &o.manifest_path))
		goto out;
	o.trace_path = tr.prefetch;
	r = warm_run(&o, json);
out:
	cli_trace_free(&tr);
	cli_image_free(&img);
	return r;
}
