/* SPDX-License-Identifier: MIT */
/*
 * The engine's statistics, formatted in one place (common/json_out): one JSON object
 * (serve --stats-json, the control socket's "stats") and the human lines (serve's summary;
 * the store/remote/cache lines also end lazyblk export). The JSON keys are read by the
 * tests and benchmarks: rename none.
 */
#include "engine.h"

#include <errno.h>
#include <stdlib.h>

#include "../../common/json_out.h"

#define U(x) ((unsigned long long)(x))

void blkd_stats_cas_json(const struct cas_source_stats *c, struct json_buf *b)
{
	const struct remote_stats *r = &c->remote;

	json_field_u64(b, "disk_hits", c->disk_hits);
	json_field_u64(b, "disk_bytes", c->disk_bytes);
	json_field_u64(b, "verify_failures", c->verify_failures);
	json_field_u64(b, "remote_fetches", c->remote_fetches);
	json_field_u64(b, "remote_bytes", r->fetched_bytes);
	json_field_u64(b, "remote_requests", r->requests);
	json_field_u64(b, "remote_retries", r->retries);
	json_field_u64(b, "remote_failures", r->failures);
	json_field_u64(b, "remote_not_found", r->not_found);
	json_field_fixed(b, "fetch_ms_p50", r->lat_p50_us / 1e3, 3);
	json_field_fixed(b, "fetch_ms_p90", r->lat_p90_us / 1e3, 3);
	json_field_fixed(b, "fetch_ms_p99", r->lat_p99_us / 1e3, 3);
	json_field_fixed(b, "fetch_ms_max", r->lat_max_us / 1e3, 3);
	json_field_u64(b, "cache_limit_bytes", c->cache_limit);
	json_field_u64(b, "cache_used_bytes", c->cache_used);
	json_field_u64(b, "cache_evictions", c->cache_evictions);
	json_field_u64(b, "cache_evicted_bytes", c->cache_evicted_bytes);
	json_field_u64(b, "plain_hits", c->plain_hits);
	json_field_u64(b, "plain_bytes", c->plain_bytes);
	json_field_u64(b, "plain_writes", c->plain_writes);
	json_field_u64(b, "plain_write_failures", c->plain_write_failures);
	json_field_u64(b, "plain_bad", c->plain_bad);
}

static void prefetch_json(const struct blkd_engine_stats *s, struct json_buf *b)
{
	const struct blkd_prefetch_stats *p = &s->prefetch;

	json_field_bool(b, "prefetch", s->has_prefetch);
	json_field_u64(b, "prefetch_planned", p->planned);
	json_field_u64(b, "prefetch_done", p->done);
	json_field_u64(b, "prefetch_fetched", p->fetched);
	json_field_u64(b, "prefetch_fetched_bytes", p->fetched_bytes);
	json_field_u64(b, "prefetch_present", p->present);
	json_field_u64(b, "prefetch_failed", p->failed);
	json_field_bool(b, "prefetch_cache_full", p->cache_full);
	json_field_bool(b, "prefetch_finished", p->finished);
	json_field_u64(b, "prefetch_hits", s->prefetch_hits);
	json_field_u64(b, "prefetch_joins", s->cas.bg_joins);
	json_field_u64(b, "fetch_joins", s->cas.joins);
}

/* One JSON object and a newline, appended to b. */
static void blkd_stats_json(const struct blkd_engine_stats *s, struct json_buf *b)
{
	json_buf_puts(b, "{");
	json_field_u64(b, "reads", s->reads);
	json_field_u64(b, "writes", s->writes);
	json_field_u64(b, "flushes", s->flushes);
	json_field_u64(b, "discards", s->discards);
	json_field_u64(b, "read_bytes", s->read_bytes);
	json_field_u64(b, "write_bytes", s->write_bytes);
	json_field_u64(b, "read_errors", s->read_errors);
	json_field_u64(b, "write_errors", s->write_errors);
	json_field_u64(b, "blocks_from_overlay", s->overlay_hits);
	json_field_u64(b, "blocks_from_metadata", s->meta_hits);
	json_field_u64(b, "blocks_from_chunks", s->chunk_hits);
	json_field_u64(b, "blocks_zero", s->zero_hits);
	json_field_u64(b, "chunk_loads", s->chunk_loads);
	json_field_u64(b, "chunk_cache_hits", s->chunk_cache_hits);
	json_field_u64(b, "chunk_loaded_bytes", s->chunk_loaded_bytes);
	json_field_u64(b, "store_read_bytes", s->store_read_bytes);
	json_field_u64(b, "chunk_readahead", s->chunk_readahead);
	json_field_u64(b, "dirty_blocks", s->dirty_blocks);
	json_field_u64(b, "zero_blocks", s->zero_blocks);
	json_field_u64(b, "snapshot_copies", s->snapshot_copies);
	json_field_u64(b, "in_flight", s->in_flight);
	blkd_stats_cas_json(&s->cas, b);
	prefetch_json(s, b);
	json_buf_puts(b, "}\n");
}

void blkd_stats_cas_text(const struct cas_source_stats *c, struct json_buf *b)
{
	const struct remote_stats *r = &c->remote;

	json_buf_printf(b, "store      %llu chunks read (%llu bytes), %llu failed verification\n",
			U(c->disk_hits), U(c->disk_bytes), U(c->verify_failures));
	if (c->has_remote)
		json_buf_printf(b, "remote     %llu chunks fetched (%llu bytes) in %llu requests, "
				"%llu retries, %llu failed, %llu not found; fetch ms p50 %.1f "
				"p90 %.1f p99 %.1f max %.1f\n",
				U(c->remote_fetches), U(r->fetched_bytes), U(r->requests),
				U(r->retries), U(r->failures), U(r->not_found),
				r->lat_p50_us / 1e3, r->lat_p90_us / 1e3, r->lat_p99_us / 1e3,
				r->lat_max_us / 1e3);
	if (c->has_plain)
		json_buf_printf(b, "plain      %llu chunks from plain copies (%llu bytes), %llu "
				"written, %llu not written, %llu bad (removed)\n",
				U(c->plain_hits), U(c->plain_bytes), U(c->plain_writes),
				U(c->plain_write_failures), U(c->plain_bad));
	if (c->has_cache)
		json_buf_printf(b, "cache      %llu of %llu bytes used, %llu chunks evicted "
				"(%llu bytes)\n",
				U(c->cache_used), U(c->cache_limit), U(c->cache_evictions),
				U(c->cache_evicted_bytes));
}

/* The human lines, appended to b. */
static void blkd_stats_text(const struct blkd_engine_stats *s, struct json_buf *b)
{
	const struct blkd_prefetch_stats *p = &s->prefetch;

	json_buf_printf(b, "requests   %llu reads (%llu bytes), %llu writes (%llu bytes), "
			"%llu flushes, %llu discards, %llu in flight; failed: %llu reads, "
			"%llu writes\n",
			U(s->reads), U(s->read_bytes), U(s->writes), U(s->write_bytes),
			U(s->flushes), U(s->discards), U(s->in_flight), U(s->read_errors),
			U(s->write_errors));
	json_buf_printf(b, "blocks     %llu from the overlay, %llu metadata, %llu from chunks, "
			"%llu zero\n",
			U(s->overlay_hits), U(s->meta_hits), U(s->chunk_hits), U(s->zero_hits));
	json_buf_printf(b, "chunks     %llu misses loaded (%llu bytes read, %llu decompressed, "
			"%llu read ahead), %llu memory cache hits\n",
			U(s->chunk_loads), U(s->store_read_bytes), U(s->chunk_loaded_bytes),
			U(s->chunk_readahead), U(s->chunk_cache_hits));
	blkd_stats_cas_text(&s->cas, b);
	if (s->has_prefetch)
		json_buf_printf(b, "prefetch   %llu of %llu chunks walked: %llu fetched (%llu bytes), "
				"%llu there already, %llu failed%s%s; %llu demand reads used a "
				"prefetched chunk, %llu joined a prefetch under way\n",
				U(p->done), U(p->planned), U(p->fetched), U(p->fetched_bytes),
				U(p->present), U(p->failed),
				p->cache_full ? ", stopped at the cache bound" : "",
				p->finished ? "" : ", running", U(s->prefetch_hits),
				U(s->cas.bg_joins));
	json_buf_printf(b, "overlay    %llu dirty blocks, %llu zeroed blocks\n",
			U(s->dirty_blocks), U(s->zero_blocks));
}

/* The engine's statistics now, formatted into *out (malloc'ed, NUL-terminated). -ENOMEM. */
static int blkd_engine_format_stats(struct blkd_engine *e, bool json, char **out, size_t *len)
{
	struct blkd_engine_stats s;
	struct json_buf b = { 0 };
	int ret;

	blkd_engine_get_stats(e, &s);
	if (json)
		blkd_stats_json(&s, &b);
	else
		blkd_stats_text(&s, &b);
	ret = b.err;
	if (ret) {
		json_buf_free(&b);
		return ret;
	}
	*out = json_buf_take(&b, len);
	return 0;
}

void blkd_engine_print_stats(struct blkd_engine *e, FILE *f, bool json)
{
	size_t len;
	char *s;

	if (blkd_engine_format_stats(e, json, &s, &len))
		return;
	fwrite(s, 1, len, f);
	free(s);
}
