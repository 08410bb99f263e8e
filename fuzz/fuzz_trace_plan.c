/* SPDX-License-Identifier: MIT */
/*
 * A trace replayed on an image, both hostile: the manifest (manifest_parse, then mkfs_run for
 * a layout), the trace (trace_parse), then what replays it — trace indexing
 * (blkd/coldstart/trace_index.c: disk bytes to files, file bytes to chunks), the fetch plan
 * (trace_plan_new, as warm and serve --prefetch make it), recording (trace_recorder_*, as
 * serve --trace-record: the trace's ranges touched, the trace written and read back) and
 * repacking (repack_run, on files, against a store). Invariants: every file range reported
 * is inside a regular file, every chunk inside the layout's table and planned once, a
 * recorded trace loads and names regular files, and a repacked manifest loads and holds the
 * same tree with the same bytes in every file.
 *
 * Input: byte 0 flags, bytes 1 and 2 two entry indexes, bytes 3..6 the manifest's length M
 * (little-endian), M bytes of manifest, then the trace.
 *   flags bit 0: share — after the manifest was accepted, entry (byte 1 % entries) takes the
 *                pieces, holes and size of entry (byte 2 % entries), both regular files: the
 *                files' pieces then overlap, which manifest_parse refuses (docs/formats.md);
 *                indexing, planning, mkfs and recording must still hold (their tables are
 *                sized by what they hold). Repacking loads its manifest from the file, so it
 *                is not run on such a view.
 *   bit 1: plan every chunk (--prefetch-all, warm --all) after the trace's.
 *   bit 2: the trace says it was recorded on this manifest (its digest patched in).
 *   bits 3-4: the repack's chunk size: the manifest's, 4 KiB, 8 KiB, 16 KiB.
 * Every piece's digest is replaced by that of one of four 16 KiB chunks the target puts in
 * its store (by the digest's first byte), and the manifest's chunk size set to 16 KiB, so
 * that repacking finds the bytes it copies; the checksums are then recomputed (fuzz.h).
 */
#include <time.h>

#include "fuzz.h"
#include "../blkd/coldstart/trace_index.h"
#include "../blkd/coldstart/trace_plan.h"
#include "../blkd/coldstart/trace_record.h"
#include "../cas/chunk.h"
#include "../cas/manifest.h"
#include "../cas/repack.h"
#include "../cas/source.h"
#include "../cas/store.h"
#include "../cas/trace.h"
#include "../layout/layout.h"
#include "../ext4gen/mkfs.h"

#define SYN_N 4
#define SYN_SIZE 16384u
#define HDR_LEN 7
#define WALK_MAX 4096          /* records looked at per input */
#define COMPARE_MAX (8u << 20) /* file bytes compared after a repack, per input */
#define TOUCH_MAX (1ull << 30)  /* disk bytes the recorder is told were read, per input */

static uint8_t syn_digest[SYN_N][SHA256_LEN];
static char store_path[PATH_MAX];
static struct store *store;
static struct cas_source *src;

static void note(void *arg, enum note_kind kind, const char *line)
{
	(void)arg;
	(void)kind;
	(void)line;
}

/* Once per process: the store and its four chunks, and a source reading it. */
static void setup(void)
{
	struct cas_source_opts so = { .no_plain = true };
	struct chunk_codec *c;
	uint8_t *data, *frame;
	size_t cap = chunk_compress_bound(SYN_SIZE), flen;

	if (store)
		return;
	fuzz_path(store_path, sizeof(store_path), "store");
	c = chunk_codec_new(1);
	data = malloc(SYN_SIZE);
	frame = malloc(cap);
	if (!c || !data || !frame || store_open(store_path, true, &store))
		abort();
	for (unsigned k = 0; k < SYN_N; k++) {
		for (unsigned i = 0; i < SYN_SIZE; i++)
			data[i] = (uint8_t)(i * (2 * k + 1) + k + (i >> 8));
		if (sha256_buf(data, SYN_SIZE, syn_digest[k]) ||
		    chunk_compress(c, data, SYN_SIZE, frame, cap, &flen) ||
		    store_put(store, syn_digest[k], frame, flen))
			abort();
	}
	if (store_commit(store))
		abort();
	so.store_dir = store_path;
	if (cas_source_open(&so, &src, NULL, 0))
		abort();
	chunk_codec_free(c);
	free(data);
	free(frame);
}

static bool is_syn(const uint8_t d[SHA256_LEN])
{
	for (unsigned k = 0; k < SYN_N; k++)
		if (!memcmp(d, syn_digest[k], SHA256_LEN))
			return true;
	return false;
}

/* Pieces name the store's chunks, the chunk size is theirs; the checksum is recomputed. */
static void manifest_patch(uint8_t *b, size_t len)
{
	struct mf_header h;
	uint64_t off;

	if (len < sizeof(h) + SHA256_LEN)
		return;
	memcpy(&h, b, sizeof(h));
	h.chunk_size = SYN_SIZE;
	memcpy(b, &h, sizeof(h));
	if (h.entry_count <= len / sizeof(struct mf_entry) &&
	    h.chunk_count <= len / sizeof(struct mf_chunk)) {
		off = sizeof(h) + h.entry_count * sizeof(struct mf_entry);
		for (uint64_t i = 0; i < h.chunk_count; i++, off += sizeof(struct mf_chunk)) {
			if (off + sizeof(struct mf_chunk) > len - SHA256_LEN)
				break;
			memcpy(b + off, syn_digest[b[off] % SYN_N], SHA256_LEN);
		}
	}
	fuzz_fix_sha_trailer(b, len);
}

/* The share flag: a view of m whose entry dst has entry src's data. NULL if not two files. */
static struct mf_entry *share(const struct manifest *m, uint8_t dst, uint8_t from,
			      struct manifest *view)
{
	size_t d = dst % m->n_entries, s = from % m->n_entries;
	struct mf_entry *e;

	if (d == s || m->entries[d].type != MF_REG || m->entries[s].type != MF_REG)
		return NULL;
	e = malloc(m->n_entries * sizeof(*e));
	if (!e)
		abort();
	memcpy(e, m->entries, m->n_entries * sizeof(*e));
	e[d].chunk_first = e[s].chunk_first;
	e[d].chunk_count = e[s].chunk_count;
	e[d].hole_first = e[s].hole_first;
	e[d].hole_count = e[s].hole_count;
	e[d].size = e[s].size;
	*view = *m;
	view->entries = e;
	return e;
}

/* ------------------------------------------------------------------ index, plan, record */

struct walk {
	const struct manifest *m;
	const struct layout *l;
};

static void on_file(void *arg, uint32_t entry, uint64_t disk_off, uint64_t file_off,
		    uint32_t len)
{
	const struct walk *w = arg;
	const struct mf_entry *e;

	if (entry >= w->m->n_entries)
		abort();
	e = &w->m->entries[entry];
	if (e->type != MF_REG || !len || file_off > e->size || len > e->size - file_off ||
	    disk_off / DISK_BLOCK >= w->l->hdr.block_count)
		abort(); /* a file range outside its file, or outside the disk */
}

static int on_chunk(void *arg, uint32_t chunk)
{
	const struct walk *w = arg;

	if (chunk >= w->l->hdr.chunk_count)
		abort();
	return 0;
}

static void index_walk(const struct manifest *m, const struct layout *l, const struct trace *t)
{
	struct walk w = { .m = m, .l = l };
	struct trace_index *x;

	if (trace_index_new(m, l, &x))
		return;
	trace_index_disk_to_files(x, 0, l->hdr.block_count * DISK_BLOCK, on_file, &w);
	for (size_t i = 0; t && i < t->n_records && i < WALK_MAX; i++) {
		const struct trace_record *r = &t->records[i];
		const struct mf_entry *e;

		if (trace_record_is_ram(r))
			continue;
		trace_index_disk_to_files(x, r->disk_off, r->disk_off + r->len, on_file, &w);
		e = r->path ? manifest_find(m, trace_path(t, r)) : NULL;
		if (e)
			trace_index_file_chunks(x, e, r->file_off, r->len, on_chunk, &w);
	}
	trace_index_free(x);
}

static void plan(const struct manifest *m, const struct layout *l, const struct trace *t,
		 bool all)
{
	struct trace_plan *p;
	uint8_t *seen;

	if (fuzz_result("trace_plan_new", trace_plan_new(t, m, l, all, &p), NULL))
		return;
	seen = calloc(l->hdr.chunk_count + 1, 1);
	if (!seen || p->n_trace > p->n || p->n > l->hdr.chunk_count ||
	    p->files_found > p->files)
		abort();
	for (size_t i = 0; i < p->n; i++) {
		if (p->chunks[i] >= l->hdr.chunk_count || seen[p->chunks[i]])
			abort(); /* outside the table, or planned twice */
		seen[p->chunks[i]] = 1;
	}
	(void)trace_plan_foreign(p);
	free(seen);
	trace_plan_free(p);
}

/* The trace's disk ranges touched, the trace written: it loads and names regular files. */
static void record(const struct manifest *m, const struct layout *l, const struct trace *t)
{
	struct timespec t0;
	struct trace_recorder *r;
	struct trace *out;
	char why[WHY_MAX] = "";
	char path[PATH_MAX];
	uint64_t budget = TOUCH_MAX;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (trace_recorder_new(l, m, &t0, &r, why, sizeof(why)))
		abort(); /* m is the manifest l was made from */
	for (size_t i = 0; t && i < t->n_records && i < WALK_MAX && budget; i++) {
		uint64_t len = t->records[i].len < budget ? t->records[i].len : budget;

		if (trace_record_is_ram(&t->records[i]))
			continue;
		trace_recorder_touch(r, t->records[i].disk_off, len);
		budget -= len;
	}
	fuzz_path(path, sizeof(path), "recorded.trace");
	ret = trace_recorder_finish(r, path, NULL, why, sizeof(why));
	trace_recorder_free(r);
	if (fuzz_result("trace_recorder_finish", ret, why))
		return;
	if (trace_load(path, &out, NULL, 0))
		abort(); /* the recorder wrote a trace its reader refuses */
	for (size_t i = 0; i < out->n_records; i++) {
		const struct trace_record *rec = &out->records[i];
		const struct mf_entry *e;

		if (!rec->path || trace_record_is_ram(rec))
			continue;
		e = manifest_find(m, trace_path(out, rec));
		if (!e || e->type != MF_REG || rec->file_off > e->size ||
		    rec->len > e->size - rec->file_off)
			abort(); /* a recorded range outside its file */
	}
	trace_free(out);
	unlink(path);
}

/* ------------------------------------------------------------------ repack */

/* A file's data bytes (holes left out) through its pieces, into a malloc'ed buffer. */
static uint8_t *file_data(const struct manifest *m, const struct mf_entry *e, uint64_t *n)
{
	uint64_t total = 0, at = 0;
	uint8_t *buf;

	for (uint32_t k = 0; k < e->chunk_count; k++)
		total += m->chunks[e->chunk_first + k].len;
	buf = malloc(total ? total : 1);
	if (!buf)
		abort();
	for (uint32_t k = 0; k < e->chunk_count; k++) {
		const struct mf_chunk *c = &m->chunks[e->chunk_first + k];
		void *block;
		size_t len, flen;

		if (cas_source_get(src, c->digest, CHUNK_SIZE_MAX, 0, &block, &len, &flen) ||
		    (uint64_t)c->off + c->len > len)
			abort(); /* a piece of a chunk the store lacks, or past its end */
		memcpy(buf + at, (uint8_t *)block + c->off, c->len);
		at += c->len;
		free(block);
	}
	*n = total;
	return buf;
}

/* The repacked manifest: the same tree, every file's bytes the same. */
static void repack_check(const struct manifest *m, const char *out_path)
{
	struct manifest *r;
	char why[WHY_MAX] = "";
	uint64_t compared = 0;

	if (manifest_load(out_path, &r, why, sizeof(why)))
		abort(); /* repack wrote a manifest its reader refuses */
	if (r->n_entries != m->n_entries)
		abort();
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *a = &m->entries[i], *b = &r->entries[i];
		uint64_t na, nb;
		uint8_t *da, *db;

		if (a->type != b->type || a->size != b->size || a->path_len != b->path_len ||
		    a->hole_count != b->hole_count ||
		    strcmp(manifest_path(m, a), manifest_path(r, b)))
			abort();
		if (a->type != MF_REG || compared > COMPARE_MAX)
			continue;
		da = file_data(m, a, &na);
		db = file_data(r, b, &nb);
		if (na != nb || memcmp(da, db, na))
			abort(); /* a file's bytes changed */
		compared += na;
		free(da);
		free(db);
	}
	manifest_free(r);
}

static int drop_new(void *arg, const uint8_t d[SHA256_LEN], const char *path)
{
	(void)arg;
	(void)path;
	if (!is_syn(d))
		store_remove(store, d);
	return 0;
}

static void repack(const struct manifest *m, const uint8_t *trace, size_t trace_len,
		   unsigned size_sel)
{
	static const uint32_t sizes[4] = { 0, 4096, 8192, 16384 };
	struct repack_opts o = { .chunk_size = sizes[size_sel & 3], .level = 1 };
	struct repack_result res;
	char mpath[PATH_MAX], tpath[PATH_MAX], opath[PATH_MAX], why[512];

	o.manifest_path = fuzz_path(mpath, sizeof(mpath), "in.manifest");
	o.trace_path = fuzz_path(tpath, sizeof(tpath), "in.trace");
	o.out_path = fuzz_path(opath, sizeof(opath), "out.manifest");
	o.src.store_dir = store_path;
	o.src.no_plain = true;
	fuzz_write_file(mpath, m->buf, m->buf_len);
	fuzz_write_file(tpath, trace, trace_len);
	why[0] = '\0';
	if (!fuzz_result("repack_run", repack_run(&o, &res, why, sizeof(why)), why))
		repack_check(m, opath);
	store_foreach(store, drop_new, NULL); /* the boot chunks go: the store stays small */
	unlink(opath);
}

/* ------------------------------------------------------------------ the input */

static struct trace *trace_take(uint8_t *b, size_t len, const struct manifest *m, bool same)
{
	uint8_t *copy;
	struct trace *t = NULL;
	char why[WHY_MAX] = "";

	if (same && len >= offsetof(struct trace_header, layout_digest))
		memcpy(b + offsetof(struct trace_header, manifest_digest), m->digest, SHA256_LEN);
	fuzz_fix_sha_trailer(b, len);
	copy = fuzz_dup(b, len);
	fuzz_result("trace_parse", trace_parse(copy, len, &t, why, sizeof(why)), why);
	return t;
}

static void run(const struct manifest *m, uint8_t flags, uint8_t *trace, size_t trace_len,
		bool shared)
{
	struct mkfs_opts mo = { .journal_size = 4 << 20, .notes = { .fn = note } };
	struct mkfs_result mr;
	struct trace *t = trace_take(trace, trace_len, m, flags & 4);
	struct layout *l = NULL;
	char why[WHY_MAX] = "";
	char lpath[PATH_MAX], reason[512];

	fuzz_path(lpath, sizeof(lpath), "fuzz.layout");
	reason[0] = '\0';
	if (!fuzz_result("mkfs_run", mkfs_run(m, &mo, lpath, &mr, reason, sizeof(reason)),
			 reason)) {
		if (layout_open(lpath, &l, why, sizeof(why)))
			abort(); /* mkfs wrote a layout its own reader refuses */
		index_walk(m, l, t);
		plan(m, l, t, flags & 2);
		record(m, l, t);
		layout_close(l);
	}
	unlink(lpath);
	if (t && !shared)
		repack(m, trace, trace_len, flags >> 3);
	trace_free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct manifest *m, view;
	struct mf_entry *ents = NULL;
	char why[WHY_MAX] = "";
	uint32_t mlen;
	uint8_t *mbuf, *tbuf;
	size_t tlen;

	if (size < HDR_LEN)
		return 0;
	fuzz_dir();
	setup();
	memcpy(&mlen, data + 3, 4);
	if (mlen > size - HDR_LEN)
		return 0;
	mbuf = fuzz_dup(data + HDR_LEN, mlen);
	manifest_patch(mbuf, mlen);
	if (fuzz_result("manifest_parse", manifest_parse(mbuf, mlen, &m, why, sizeof(why)), why))
		return 0;
	tlen = size - HDR_LEN - mlen;
	tbuf = fuzz_dup(data + HDR_LEN + mlen, tlen);
	if (data[0] & 1)
		ents = share(m, data[1], data[2], &view);
	run(ents ? &view : m, data[0], tbuf, tlen, ents != NULL);
	free(ents);
	free(tbuf);
	manifest_free(m);
	return 0;
}
