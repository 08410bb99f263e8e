/* SPDX-License-Identifier: MIT */
/*
 * import_run(): the store opened, the source handed to its importer (by its prefix, or a
 * directory or a tar file), the chunker drained, the tree and its config written as the
 * manifest.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "../../common/clock.h"
#include "../chunk.h"
#include "import.h"

static int run_source(struct import_ctx *ic, const char *src)
{
	struct stat st;

	if (!strncmp(src, "oci:", 4))
		return import_oci(ic, src + 4);
	if (!strncmp(src, "docker-archive:", 15))
		return import_docker_archive(ic, src + 15);
	if (!strncmp(src, "oci-archive:", 12))
		return import_oci_archive(ic, src + 12);
	if (!strncmp(src, "docker://", 9))
		return import_registry(ic, src + 9);
	if (stat(src, &st) < 0) {
		int ret = -errno;

		return why_first(ic->why, ic->why_len, ret, "%s: %s", src, strerror(-ret));
	}
	if (S_ISDIR(st.st_mode))
		return import_dir(ic, src);
	if (S_ISREG(st.st_mode))
		return import_tar_file(ic, src);
	return why_first(ic->why, ic->why_len, -EINVAL,
			 "%s: not a directory, a tar file, oci:DIR or docker-archive:FILE", src);
}

/* The summary's figures, from the manifest as written: what the image holds. */
static int image_totals(struct import_ctx *ic, const char *path, struct import_result *res)
{
	struct manifest_totals t;
	struct manifest *m;
	char why[WHY_MAX] = "";
	int ret = manifest_load(path, &m, why, sizeof(why));

	if (ret)
		return why_first(ic->why, ic->why_len, ret, "%s: %s", path,
				 why[0] ? why : strerror(-ret));
	ret = manifest_totals(m, &t);
	manifest_free(m);
	if (ret)
		return ret;
	res->file_bytes = t.file_bytes;
	res->image_chunks = t.chunks;
	return 0;
}

static int write_manifest(struct import_ctx *ic, const struct import_opts *o,
			  struct import_result *res)
{
	struct manifest_writer *w = manifest_writer_new(chunker_chunk_size(ic->chunker));
	char why[WHY_MAX] = "";
	int ret;

	if (!w)
		return -ENOMEM;
	ret = tree_write(ic->tree, w);
	if (!ret && ic->config_json)
		ret = manifest_writer_set_config(w, ic->config_json, ic->config_len);
	if (ret) {
		why_first(ic->why, ic->why_len, ret, "building manifest: %s", strerror(-ret));
	} else {
		res->entries = tree_node_count(ic->tree);
		ret = manifest_writer_write(w, o->output, res->digest, why, sizeof(why));
		if (ret)
			why_first(ic->why, ic->why_len, ret, "%s: %s", o->output,
				  why[0] ? why : strerror(-ret));
	}
	manifest_writer_free(w);
	return ret ? ret : image_totals(ic, o->output, res);
}

int import_run(const struct import_opts *o, struct import_result *res, char *why,
	       size_t why_len)
{
	struct chunker_opts copts = { o->threads, o->chunk_size, o->level };
	struct import_ctx ic = { .o = o, .why = why, .why_len = why_len };
	struct store *store = NULL;
	struct timespec t0;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	memset(res, 0, sizeof(*res));
	if (why_len)
		why[0] = '\0';
	ret = import_check_source(&ic, o->src);
	if (ret)
		return ret;
	ret = o->init ? store_init(o->store_dir) : 0;
	if (!ret)
		ret = store_open(o->store_dir, true, &store);
	if (ret && store_open_why(ret, o->store_dir, !o->init, why, why_len))
		return ret;
	if (ret)
		return why_first(ic.why, ic.why_len, ret, "store %s: %s", o->store_dir,
				 strerror(-ret));
	ic.src_label = o->src;
	ic.store = store;
	ic.tree = tree_new();
	if (!ic.tree) {
		ret = -ENOMEM;
		goto out;
	}
	ret = chunker_new(store, &copts, &ic.chunker);
	if (ret) {
		why_first(ic.why, ic.why_len, ret, "cannot start chunker: %s", strerror(-ret));
		goto out;
	}
	ic.pack_max = o->pack_max;
	ret = run_source(&ic, o->src);
	if (!ret && import_cancelled(&ic))
		ret = why_first(ic.why, ic.why_len, -ECANCELED, "interrupted");
	if (!ret) {
		ret = import_pack_flush(&ic);
		if (ret && ret != -ENOMEM)
			why_first(ic.why, ic.why_len, ret, "store %s: %s", o->store_dir,
				  strerror(-ret));
	}
	if (ret) {
		chunker_finish(ic.chunker); /* let staged chunks land; they are valid */
		goto out;
	}
	chunker_wait(ic.chunker, import_progress_finishing, &ic);
	ret = chunker_finish(ic.chunker);
	if (ret) {
		why_first(ic.why, ic.why_len, ret, "store %s: %s", o->store_dir, strerror(-ret));
		goto out;
	}
	chunker_get_stats(ic.chunker, &res->chunks);
	ret = write_manifest(&ic, o, res);
	if (!ret)
		res->seconds = clock_ms_since(&t0) / 1e3;
out:
	if (ret == -ENOMEM)
		why_first(ic.why, ic.why_len, ret,
			  "out of memory"); /* unless a reason is there already */
	chunker_free(ic.chunker);
	tree_free(ic.tree);
	free(ic.config_json);
	store_close(store);
	return ret;
}
