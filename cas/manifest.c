/* SPDX-License-Identifier: MIT */
/*
 * Manifest loading, validation and lookups (format in docs/formats.md); writing is
 * manifest_write.c.
 */
#include "manifest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "../common/grow.h"

_Static_assert(sizeof(struct mf_header) == 96, "header layout");
_Static_assert(sizeof(struct mf_entry) == 136, "entry layout");
_Static_assert(sizeof(struct mf_chunk) == 40, "chunk layout");
_Static_assert(sizeof(struct mf_hole) == 16, "hole layout");
_Static_assert(sizeof(struct mf_xattr) == 24, "xattr layout");

int manifest_path_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t n = alen < blen ? alen : blen;

	for (size_t i = 0; i < n; i++) {
		unsigned ca = (unsigned char)a[i], cb = (unsigned char)b[i];

		if (ca == cb)
			continue;
		/* '/' sorts first so that a directory's subtree follows it contiguously */
		ca = ca == '/' ? 0 : ca + 1;
		cb = cb == '/' ? 0 : cb + 1;
		return ca < cb ? -1 : 1;
	}
	return alen < blen ? -1 : alen > blen ? 1 : 0;
}

const char *manifest_type_name(uint8_t type)
{
	switch (type) {
	case MF_REG: return "file";
	case MF_DIR: return "dir";
	case MF_SYMLINK: return "symlink";
	case MF_HARDLINK: return "hardlink";
	case MF_CHR: return "char";
	case MF_BLK: return "block";
	case MF_FIFO: return "fifo";
	case MF_SOCK: return "socket";
	}
	return "unknown";
}

/* ------------------------------------------------------------------ loading */

static bool range_ok(uint64_t off, uint64_t len, uint64_t limit)
{
	return off <= limit && len <= limit - off;
}

static bool str_ok(const struct manifest *m, uint64_t off, uint64_t len)
{
	return range_ok(off, len, m->hdr->strings_size) && len < m->hdr->strings_size - off &&
	       m->strings[off + len] == '\0';
}

static bool path_ok(const char *p, size_t len)
{
	if (len == 0 || p[0] != '/')
		return false;
	if (len == 1)
		return true;
	if (p[len - 1] == '/')
		return false;
	for (size_t i = 0; i < len; i++) {
		if (p[i] == '\0')
			return false;
		if (p[i] != '/')
			continue;
		/* component starting at i+1 */
		const char *c = p + i + 1;
		size_t rest = len - i - 1;

		if (rest == 0 || c[0] == '/')
			return false;
		if (c[0] == '.' && (rest == 1 || c[1] == '/'))
			return false;
		if (c[0] == '.' && c[1] == '.' && (rest == 2 || c[2] == '/'))
			return false;
	}
	return true;
}

static int bad(char *why, size_t why_len, const char *msg)
{
	return why_set(why, why_len, -EBADMSG, "%s", msg);
}

/* Binary search among entries[0, n). */
static const struct mf_entry *find_before(const struct manifest *m, size_t n, const char *path,
					  size_t plen)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct mf_entry *e = &m->entries[mid];
		int c = manifest_path_cmp(m->strings + e->path_off, e->path_len, path, plen);

		if (c == 0)
			return e;
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Every string an entry names (its path, its link target, its xattrs' names and values) in
 * range and NUL-terminated: checked before anything reads them (sorting, lookups).
 */
static int check_strings(const struct manifest *m, const struct mf_entry *e, char *why,
			 size_t why_len)
{
	if (!str_ok(m, e->path_off, e->path_len) ||
	    !path_ok(m->strings + e->path_off, e->path_len))
		return bad(why, why_len, "bad entry path");
	if ((e->type == MF_SYMLINK || e->type == MF_HARDLINK) &&
	    (e->link_len == 0 || !str_ok(m, e->link_off, e->link_len)))
		return bad(why, why_len, "bad link target");
	/* unchecked, it would be read by whoever copies an entry whole (repack did) */
	if (e->type != MF_SYMLINK && e->type != MF_HARDLINK && e->link_len)
		return bad(why, why_len, "link target on an entry that is not a link");
	if (!range_ok(e->xattr_first, e->xattr_count, m->n_xattrs))
		return bad(why, why_len, "entry range out of bounds");
	for (uint32_t k = 0; k < e->xattr_count; k++) {
		const struct mf_xattr *x = &m->xattrs[e->xattr_first + k];

		if (x->name_len == 0 || !str_ok(m, x->name_off, x->name_len) ||
		    memchr(m->strings + x->name_off, '\0', x->name_len))
			return bad(why, why_len, "bad xattr name (empty, out of range or with a NUL)");
		if (!str_ok(m, x->value_off, x->value_len))
			return bad(why, why_len, "bad xattr value (out of range)");
	}
	return 0;
}

/* After check_strings. */
static bool xattrs_sorted(const struct manifest *m, const struct mf_entry *e)
{
	for (uint32_t k = 1; k < e->xattr_count; k++) {
		const struct mf_xattr *a = &m->xattrs[e->xattr_first + k - 1];
		const struct mf_xattr *b = &m->xattrs[e->xattr_first + k];
		size_t n = a->name_len < b->name_len ? a->name_len : b->name_len;
		int c = memcmp(m->strings + a->name_off, m->strings + b->name_off, n);

		if (c > 0 || (c == 0 && a->name_len >= b->name_len))
			return false; /* out of order, or the same name twice */
	}
	return true;
}

/*
 * Depth-first order means the ancestors of an entry are exactly the directories on a
 * stack that we pop as subtrees end; the top must be the entry's parent.
 */
struct dir_stack {
	const struct mf_entry **e;
	size_t n, cap;
};

static bool is_parent_of(const struct manifest *m, const struct mf_entry *d, const char *p,
			 size_t plen)
{
	if (d->path_len == 1)
		return memchr(p + 1, '/', plen - 1) == NULL;
	return plen > d->path_len && p[d->path_len] == '/' &&
	       !memcmp(m->strings + d->path_off, p, d->path_len) &&
	       memchr(p + d->path_len + 1, '/', plen - d->path_len - 1) == NULL;
}

static bool is_ancestor_of(const struct manifest *m, const struct mf_entry *d, const char *p,
			   size_t plen)
{
	if (d->path_len == 1)
		return true;
	return plen > d->path_len && p[d->path_len] == '/' &&
	       !memcmp(m->strings + d->path_off, p, d->path_len);
}

static int check_parent(struct manifest *m, struct dir_stack *st, const struct mf_entry *e,
			char *why, size_t why_len)
{
	const char *p = m->strings + e->path_off;

	if (e->path_len == 1) /* the root */
		goto push;
	while (st->n && !is_ancestor_of(m, st->e[st->n - 1], p, e->path_len))
		st->n--;
	if (!st->n || !is_parent_of(m, st->e[st->n - 1], p, e->path_len))
		return bad(why, why_len, "parent directory missing or not a directory");
push:
	if (e->type != MF_DIR)
		return 0;
	if (!grow((void **)&st->e, &st->cap, st->n + 1, sizeof(*st->e)))
		return -ENOMEM;
	st->e[st->n++] = e;
	return 0;
}

static int validate_each(struct manifest *m, struct dir_stack *st, char *why, size_t why_len);

static int validate_entries(struct manifest *m, char *why, size_t why_len)
{
	struct dir_stack st = { 0 };
	int ret = validate_each(m, &st, why, why_len);

	free(st.e);
	return ret;
}

/* A regular file's pieces and holes (after validate_each's range checks). */
static int check_data(const struct manifest *m, const struct mf_entry *e, char *why,
		      size_t why_len)
{
	uint64_t sum = 0, end = 0;

	for (uint32_t k = 0; k < e->chunk_count; k++) {
		const struct mf_chunk *c = &m->chunks[e->chunk_first + k];

		if (c->len == 0 || c->len > m->hdr->chunk_size ||
		    c->off > m->hdr->chunk_size - c->len)
			return bad(why, why_len, "bad chunk length or offset");
		sum += c->len;
	}
	for (uint32_t k = 0; k < e->hole_count; k++) {
		const struct mf_hole *h = &m->holes[e->hole_first + k];

		/* sorted, disjoint and never adjacent (adjacent holes are one) */
		if (h->len == 0 || (k && h->off <= end) || !range_ok(h->off, h->len, e->size))
			return bad(why, why_len, "bad hole list");
		end = h->off + h->len;
		sum += h->len;
	}
	if (sum != e->size)
		return bad(why, why_len, "chunks and holes do not add up to the file size");
	return 0;
}

/*
 * The regular files' pieces tile chunks[] in entry order: each file's pieces begin where the
 * previous file's end, and the last file's end at chunk_count. So no two files share a
 * piece, and a table of chunk_count holds every (file, piece) (trace indexing sizes one).
 * A file without pieces is not looked at (its chunk_first means nothing).
 */
static int check_piece_order(const struct manifest *m, char *why, size_t why_len)
{
	uint64_t next = 0;

	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *e = &m->entries[i];

		if (e->type != MF_REG || !e->chunk_count)
			continue;
		if (e->chunk_first != next)
			return bad(why, why_len, "pieces of files overlap or are out of order");
		next += e->chunk_count;
	}
	return next == m->n_chunks ? 0 : bad(why, why_len, "pieces that no file names");
}

static int validate_each(struct manifest *m, struct dir_stack *st, char *why, size_t why_len)
{
	const struct mf_entry *prev = NULL;
	int ret;

	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *e = &m->entries[i];
		const char *p;

		ret = check_strings(m, e, why, why_len);
		if (ret)
			return ret;
		p = m->strings + e->path_off;
		if (i == 0 && (e->path_len != 1 || e->type != MF_DIR))
			return bad(why, why_len, "first entry is not the root directory");
		if (prev && manifest_path_cmp(m->strings + prev->path_off, prev->path_len, p,
					      e->path_len) >= 0)
			return bad(why, why_len, "entries not sorted or duplicated");
		ret = check_parent(m, st, e, why, why_len);
		if (ret)
			return ret;
		if (e->type < MF_REG || e->type > MF_SOCK)
			return bad(why, why_len, "bad entry type");
		if (e->mode & ~07777u)
			return bad(why, why_len, "bad entry mode");
		if (!range_ok(e->chunk_first, e->chunk_count, m->n_chunks) ||
		    !range_ok(e->hole_first, e->hole_count, m->n_holes))
			return bad(why, why_len, "entry range out of bounds");
		if (e->atime_ns >= 1000000000u || e->mtime_ns >= 1000000000u ||
		    e->ctime_ns >= 1000000000u)
			return bad(why, why_len, "bad timestamp nanoseconds");
		if (e->type == MF_SYMLINK && (e->link_len > MF_SYMLINK_MAX || e->size != e->link_len))
			return bad(why, why_len, "bad symlink target length");
		if (e->type == MF_HARDLINK) {
			const struct mf_entry *t = find_before(m, i, m->strings + e->link_off,
							       e->link_len);

			if (!t || t->type == MF_DIR || t->type == MF_HARDLINK)
				return bad(why, why_len, "hardlink target is not an earlier non-directory entry");
		}
		if (!xattrs_sorted(m, e))
			return bad(why, why_len, "xattrs not sorted by name or duplicated");
		if (e->type != MF_REG && (e->chunk_count || e->hole_count))
			return bad(why, why_len, "data on a non-regular entry");
		if (e->type == MF_REG) {
			ret = check_data(m, e, why, why_len);
			if (ret)
				return ret;
		}
		prev = e;
	}
	return check_piece_order(m, why, why_len);
}

static int parse(uint8_t *buf, size_t len, struct manifest **out, char *why, size_t why_len)
{
	const struct mf_header *h = (const struct mf_header *)buf;
	uint8_t digest[SHA256_LEN];
	struct manifest *m;
	uint64_t need;
	int ret;

	if (len < 8) {
		ret = bad(why, why_len, "file too short (not a lazyblk manifest)");
		goto fail;
	}
	if (memcmp(buf, MF_MAGIC, 8) != 0) {
		ret = bad(why, why_len, "bad magic (not a lazyblk manifest)");
		goto fail;
	}
	if (len < sizeof(*h)) {
		ret = bad(why, why_len, "truncated (shorter than the header)");
		goto fail;
	}
	if (h->version != MF_VERSION) {
		ret = bad(why, why_len, "unsupported manifest version");
		goto fail;
	}
	if (h->header_size != sizeof(*h)) {
		ret = bad(why, why_len, "bad header size");
		goto fail;
	}
	/* Every count is bounded by the file length, so none of these overflow. */
	if (h->entry_count > len / sizeof(struct mf_entry) ||
	    h->chunk_count > len / sizeof(struct mf_chunk) ||
	    h->hole_count > len / sizeof(struct mf_hole) ||
	    h->xattr_count > len / sizeof(struct mf_xattr) || h->strings_size > len) {
		ret = bad(why, why_len, "truncated (counts exceed the file size)");
		goto fail;
	}
	need = sizeof(*h) + h->entry_count * sizeof(struct mf_entry) +
	       h->chunk_count * sizeof(struct mf_chunk) + h->hole_count * sizeof(struct mf_hole) +
	       h->xattr_count * sizeof(struct mf_xattr) + h->strings_size + SHA256_LEN;
	if (need != len) {
		ret = bad(why, why_len, need > len ? "truncated" : "trailing garbage after the manifest");
		goto fail;
	}
	ret = sha256_buf(buf, len - SHA256_LEN, digest);
	if (ret)
		goto fail;
	if (memcmp(digest, buf + len - SHA256_LEN, SHA256_LEN) != 0) {
		ret = bad(why, why_len, "checksum mismatch (file corrupt)");
		goto fail;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		ret = -ENOMEM;
		goto fail;
	}
	m->buf = buf;
	m->buf_len = len;
	m->hdr = h;
	m->n_entries = h->entry_count;
	m->n_chunks = h->chunk_count;
	m->n_holes = h->hole_count;
	m->n_xattrs = h->xattr_count;
	m->entries = (const struct mf_entry *)(buf + sizeof(*h));
	m->chunks = (const struct mf_chunk *)(m->entries + m->n_entries);
	m->holes = (const struct mf_hole *)(m->chunks + m->n_chunks);
	m->xattrs = (const struct mf_xattr *)(m->holes + m->n_holes);
	m->strings = (const char *)(m->xattrs + m->n_xattrs);
	memcpy(m->digest, digest, SHA256_LEN);
	if (m->n_entries == 0) {
		m->buf = NULL;
		manifest_free(m);
		ret = bad(why, why_len, "no entries (the root directory is missing)");
		goto fail;
	}
	if (h->config_len && !str_ok(m, h->config_off, h->config_len)) {
		m->buf = NULL;
		manifest_free(m);
		ret = bad(why, why_len, "bad config range");
		goto fail;
	}
	ret = validate_entries(m, why, why_len);
	if (ret) {
		m->buf = NULL;
		manifest_free(m);
		goto fail;
	}
	*out = m;
	return 0;
fail:
	free(buf);
	return ret;
}

int manifest_parse(uint8_t *buf, size_t len, struct manifest **out, char *why, size_t why_len)
{
	return parse(buf, len, out, why, why_len);
}

/*
 * The file is read into private memory, never mapped: what was validated is what is used,
 * whatever another process does to the file afterwards (rewrites it in place, truncates it).
 * A copy costs about as much as the hash pass that follows (docs/security.md).
 */
int manifest_load(const char *path, struct manifest **out, char *why, size_t why_len)
{
	uint8_t *buf;
	size_t len;
	int ret;

	if (why_len)
		why[0] = '\0';
	ret = fs_read_file(path, &buf, &len);
	if (ret == -EINVAL)
		why_set(why, why_len, ret, "not a regular file"); /* a FIFO, a device: never opened */
	if (ret)
		return ret;
	return parse(buf, len, out, why, why_len);
}

void manifest_free(struct manifest *m)
{
	if (!m)
		return;
	free(m->buf);
	free(m);
}

uint64_t manifest_file_to_data(const struct manifest *m, const struct mf_entry *e, uint64_t f)
{
	uint64_t d;

	if (f > e->size)
		f = e->size;
	d = f;
	for (uint32_t i = 0; i < e->hole_count; i++) {
		const struct mf_hole *h = &m->holes[e->hole_first + i];

		if (h->off >= f)
			break;
		d -= (h->off + h->len < f ? h->off + h->len : f) - h->off;
	}
	return d;
}

uint64_t manifest_data_to_file(const struct manifest *m, const struct mf_entry *e, uint64_t d,
			       uint64_t *room)
{
	uint64_t f = d;

	*room = UINT64_MAX;
	for (uint32_t i = 0; i < e->hole_count; i++) {
		const struct mf_hole *h = &m->holes[e->hole_first + i];

		if (h->off > f) {
			*room = h->off - f;
			break;
		}
		f += h->len;
	}
	return f;
}

int manifest_pieces_in(const struct manifest *m, const struct mf_entry *e, uint64_t a,
		       uint64_t b, mf_piece_fn cb, void *arg)
{
	uint64_t pos = 0;
	int ret;

	for (uint32_t k = 0; k < e->chunk_count && pos < b; k++) {
		const struct mf_chunk *c = &m->chunks[e->chunk_first + k];

		if (pos + c->len > a && (ret = cb(arg, c, pos)))
			return ret;
		pos += c->len;
	}
	return 0;
}

const struct mf_entry *manifest_find(const struct manifest *m, const char *path)
{
	return find_before(m, m->n_entries, path, strlen(path));
}

static int digest_cmp(const void *a, const void *b)
{
	return memcmp(a, b, SHA256_LEN);
}

int manifest_totals(const struct manifest *m, struct manifest_totals *t)
{
	uint8_t (*d)[SHA256_LEN];

	memset(t, 0, sizeof(*t));
	for (size_t i = 0; i < m->n_entries; i++) {
		const struct mf_entry *e = &m->entries[i];

		t->by_type[e->type]++;
		if (e->type == MF_REG)
			t->file_bytes += e->size;
		for (uint32_t k = 0; k < e->hole_count; k++)
			t->hole_bytes += m->holes[e->hole_first + k].len;
		t->xattrs += e->xattr_count;
	}
	if (!m->n_chunks)
		return 0;
	d = malloc(m->n_chunks * sizeof(*d));
	if (!d)
		return -ENOMEM;
	for (size_t i = 0; i < m->n_chunks; i++)
		memcpy(d[i], m->chunks[i].digest, SHA256_LEN);
	qsort(d, m->n_chunks, sizeof(*d), digest_cmp);
	t->chunks = 1;
	for (size_t i = 1; i < m->n_chunks; i++)
		t->chunks += memcmp(d[i], d[i - 1], SHA256_LEN) != 0;
	free(d);
	return 0;
}
