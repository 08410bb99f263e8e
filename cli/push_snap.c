/* SPDX-License-Identifier: MIT */
/* lazyblk push --remote REF SNAPSHOT: a VM snapshot published by name (layout/snap_ref.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../common/json_out.h"
#include "../common/log.h"
#include "../common/size.h"
#include "../layout/snap_ref.h"
#include "cli.h"

static void snap_progress(void *arg, uint64_t done, uint64_t total)
{
	(void)arg;
	if (log_progress_due())
		log_progress("pushing: %llu of %llu chunks", (unsigned long long)done,
			     (unsigned long long)total);
}

static int snap_json(const struct snap_push_opts *o, const struct snap_push_stats *st)
{
	const struct cas_push_stats *c = &st->img.chunks;
	struct json_buf b = { 0 };

	json_buf_puts(&b, "{");
	cli_json_path(&b, "remote", o->push.remote.url);
	json_field_u64(&b, "chunks", c->chunks);
	json_field_u64(&b, "uploaded", c->uploaded);
	json_field_u64(&b, "uploaded_bytes", c->uploaded_bytes);
	json_field_u64(&b, "present", c->present);
	json_field_fixed(&b, "seconds", c->seconds, 3);
	cli_json_path(&b, "image", o->push.remote.url);
	json_field_str(&b, "kind", "vm-snapshot");
	cli_json_digest(&b, "snapshot", st->id);
	if (st->has_disk)
		cli_json_digest(&b, "layout_digest", st->layout);
	json_field_u64(&b, "layers", st->has_disk ? st->layers : 0);
	json_field_u64(&b, "ram_chunks", st->ram_chunks);
	json_field_u64(&b, "disk_chunks", st->disk_chunks);
	json_field_u64(&b, "layout_bytes", st->img.layout_bytes);
	json_field_u64(&b, "manifest_bytes", st->img.manifest_bytes);
	json_field_u64(&b, "snapshot_bytes", st->img.snapdoc_bytes);
	cli_json_digest(&b, "digest", st->img.digest);
	json_buf_puts(&b, "}");
	return cli_json_print(&b);
}

int cli_push_snapshot(const struct cas_push_opts *po, const char *snap, bool json)
{
	struct snap_push_opts o = { .push = *po, .snapshot = snap };
	struct snap_push_stats st;
	const struct cas_push_stats *c = &st.img.chunks;
	char why[PATH_MAX + 512], created[32], h[32], hex[SHA256_HEX_LEN + 1];
	time_t t = time(NULL);
	struct tm tm;
	int ret;

	gmtime_r(&t, &tm);
	strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
	o.created = created;
	o.push.progress = snap_progress;
	o.push.cancel = cli_interrupt_catch();
	ret = snap_push(&o, &st, why, sizeof(why));
	log_progress_done();
	if (ret) {
		log_error("%s", why[0] ? why : strerror(-ret));
		return ret == -ECANCELED ? CLI_EXIT_INTERRUPTED : 1;
	}
	if (json)
		return snap_json(&o, &st);
	sha256_to_hex(st.id, hex);
	printf("pushed VM snapshot %s (sha256:%.12s, %llu RAM chunks, %s%u layout%s) to %s: "
	       "%llu chunks, %llu uploaded (%s), %llu already there, %.2f s\n", snap, hex,
	       (unsigned long long)st.ram_chunks, st.has_disk ? "disk: " : "no disk, ",
	       st.has_disk ? st.layers : 0, st.has_disk && st.layers == 1 ? "" : "s",
	       po->remote.url, (unsigned long long)c->chunks, (unsigned long long)c->uploaded,
	       size_human(c->uploaded_bytes + st.img.layout_bytes + st.img.manifest_bytes +
			  st.img.snapdoc_bytes, h, sizeof(h)),
	       (unsigned long long)c->present, c->seconds);
	return 0;
}
