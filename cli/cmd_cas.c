/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "../cas/store.h"
#include "../cas/verify.h"
#include "../common/log.h"
#include "../common/size.h"
#include "cli.h"

static const char cas_usage[] =
	"usage: lazyblk cas verify --store DIR\n"
	"       lazyblk cas stats --store DIR\n"
	"\n"
	"verify  decompress and re-hash every chunk; print each corrupt one as\n"
	"        'corrupt: HEX (reason)' and exit 1 if there are any\n"
	"stats   chunk count, raw (uncompressed) bytes and stored bytes\n"
	"\n"
	"options:\n"
	"  -s, --store DIR   the chunk store\n"
	"  -h, --help        this text\n";

static void report(void *arg, const char *hex, const char *why)
{
	(void)arg;
	printf("corrupt: %s (%s)\n", hex, why);
}

int cmd_cas(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "store", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *store_dir = NULL, *sub;
	struct store *s;
	int c, ret;

	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		fputs(cas_usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : 0;
	}
	sub = argv[1];
	if (strcmp(sub, "verify") && strcmp(sub, "stats")) {
		if (!strcmp(sub, "gc"))
			return cli_usage_error("gc: not available in this version yet");
		return cli_usage_error("unknown cas command '%s' (see lazyblk cas --help)", sub);
	}
	log_set_context(!strcmp(sub, "verify") ? "cas verify" : "cas stats");
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, ":s:h", opts, NULL)) != -1) {
		switch (c) {
		case 's': store_dir = optarg; break;
		case 'h': fputs(cas_usage, stdout); return 0;
		default: return cli_bad_option("cas", argv + 1, c);
		}
	}
	if (optind != argc - 1)
		return cli_usage_error("unexpected argument '%s'", argv[1 + optind]);
	if (!store_dir)
		return cli_usage_error("missing --store DIR");
	ret = store_open(store_dir, false, &s);
	if (ret) {
		log_error("%s: %s", store_dir,
			  ret == -ENOENT ? "not a lazyblk store (no chunks/ directory)"
					 : strerror(-ret));
		return 1;
	}
	if (!strcmp(sub, "stats")) {
		struct store_stats st;
		char h1[32], h2[32];

		ret = store_stats(s, &st);
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
		return 0;
	}
	struct verify_result res;

	ret = store_verify(s, report, NULL, &res);
	store_close(s);
	if (ret) {
		log_error("%s: %s", store_dir, strerror(-ret));
		return 1;
	}
	printf("verified %llu chunks: %llu ok, %llu corrupt\n", (unsigned long long)res.checked,
	       (unsigned long long)res.ok, (unsigned long long)res.corrupt);
	if (res.corrupt) {
		log_error("%llu corrupt chunk%s in %s", (unsigned long long)res.corrupt,
			  res.corrupt == 1 ? "" : "s", store_dir);
		return 1;
	}
	return 0;
}
