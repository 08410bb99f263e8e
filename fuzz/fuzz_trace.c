/* SPDX-License-Identifier: MIT */
/*
 * The boot trace reader (cas/trace.c: trace_parse, what trace_load runs on a file's bytes),
 * then every record's path as `trace show` and the prefetch planner read them. The trailing
 * sha256 is recomputed first (fuzz.h).
 */
#include "fuzz.h"
#include "../cas/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *buf = fuzz_dup(data, size);
	volatile size_t sink = 0;
	char why[WHY_MAX] = "";
	struct trace *t;

	fuzz_dir();
	fuzz_fix_sha_trailer(buf, size);
	if (fuzz_result("trace_parse", trace_parse(buf, size, &t, why, sizeof(why)), why))
		return 0;
	for (size_t i = 0; i < t->n_records; i++)
		sink += strlen(trace_path(t, &t->records[i])) + t->records[i].len;
	(void)sink;
	trace_free(t);
	return 0;
}
