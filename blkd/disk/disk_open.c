/* SPDX-License-Identifier: MIT */
/*
 * blkd/disk/disk_open: the one way in (disk.h). A spec is checked, then opened as the lazy
 * image (a struct blkd_engine the disk owns) or as a raw file or block device.
 */
#include "disk_int.h"

#include <string.h>

#include "../engine/engine.h"

/* A spec names one disk, and only what that kind of disk takes. */
static int spec_check(const struct disk_spec *s, char *why, size_t why_len)
{
	if (!s->raw_path && !s->layout_path)
		return why_set(why, why_len, -EINVAL, "no disk: give an image layout or a raw "
			       "file");
	if (s->raw_path && s->layout_path)
		return why_set(why, why_len, -EINVAL, "both an image layout (%s) and a raw file "
			       "(%s): one disk is one or the other", s->layout_path, s->raw_path);
	if (s->raw_path) {
		const struct cas_source_opts *t = &s->tiers;

		if (t->store_dir || t->remote_url || t->cache_size || s->overlay_path ||
		    s->manifest_path || s->trace_record || s->prefetch_trace || s->prefetch_all)
			return why_set(why, why_len, -EINVAL, "%s: a raw disk takes no store, "
				       "overlay, remote or traces", s->raw_path);
		return 0;
	}
	if (!s->tiers.store_dir)
		return why_set(why, why_len, -EINVAL, "%s: no store for the image's chunks",
			       s->layout_path);
	return 0;
}

static int raw_open(const struct disk_spec *s, struct disk *out, char *why, size_t why_len)
{
	int ret = disk_raw_open(s->raw_path, s->read_only, out);

	if (ret == -EINVAL)
		return why_set(why, why_len, ret, "%s: not a disk (want a regular file or a block "
			       "device of at least 512 bytes)", s->raw_path);
	if (ret)
		return why_set(why, why_len, ret, "%s: %s", s->raw_path, strerror(-ret));
	return 0;
}

static int image_open(const struct disk_spec *s, struct disk *out, char *why, size_t why_len)
{
	const struct blkd_engine_opts eo = {
		.layout_path = s->layout_path,
		.layout_fetched = s->layout_fetched,
		.store_dir = s->tiers.store_dir,
		.overlay_path = s->overlay_path,
		.mem_cache = s->mem_cache,
		.read_only = s->read_only,
		.remote_url = s->tiers.remote_url,
		.cache_size = s->tiers.cache_size,
		.fetch_concurrency = s->tiers.concurrency,
		.fetch_timeout_ms = s->tiers.timeout_ms,
		.fetch_retries = s->tiers.retries,
		.manifest_path = s->manifest_path,
		.trace_record = s->trace_record,
		.prefetch_trace = s->prefetch_trace,
		.prefetch_all = s->prefetch_all,
		.readahead = s->readahead,
		.no_plain = s->tiers.no_plain,
		.check = s->check,
		.notes = s->notes,
	};
	struct blkd_engine *e;
	int ret = blkd_engine_open(&eo, &e, why, why_len);

	if (ret)
		return ret;
	disk_engine(e, out);
	return 0;
}

int disk_open(const struct disk_spec *spec, struct disk *out, char *why, size_t why_len)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if (why_len)
		why[0] = '\0';
	ret = spec_check(spec, why, why_len);
	if (ret)
		return ret;
	return spec->raw_path ? raw_open(spec, out, why, why_len)
			      : image_open(spec, out, why, why_len);
}
