/* SPDX-License-Identifier: MIT */
/* The trace file: loading, validating and writing it. */
#include "trace.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../common/fsutil.h"
#include "manifest.h"

#define BAD(msg)                                                     \
	do {                                                         \
		return why_set(why, why_len, -EBADMSG, "%s", (msg)); \
	} while (0)

static bool id_is_zero(const uint8_t id[32])
{
	static const uint8_t zero[32];

	return !memcmp(id, zero, sizeof(zero));
}

static int validate(const uint8_t *buf, size_t len, char *why, size_t why_len)
{
	const struct trace_header *h = (const void *)buf;
	const struct trace_record *rec;
	const char *strings;
	uint8_t sum[SHA256_LEN];
	uint64_t body;

	if (len < sizeof(*h) + SHA256_LEN)
		BAD("truncated (shorter than a trace header)");
	if (memcmp(h->magic, TRACE_MAGIC, 8))
		BAD("bad magic (not a lazyblk trace)");
	if (h->version != TRACE_VERSION && h->version != TRACE_VERSION_DISK)
		BAD("unsupported trace version (this lazyblk reads versions 1 and 2)");
	if (h->header_size != sizeof(*h))
		BAD("bad header size");
	if (h->flags & ~TRACE_F_TRUNCATED)
		BAD("unknown flags");
	if (h->created > TRACE_CREATED_MAX)
		BAD("creation time out of range (after the year 9999)");
	if (h->record_count > TRACE_RECORDS_MAX || h->strings_size > TRACE_STRINGS_MAX ||
	    h->strings_size == 0)
		BAD("record or string table size out of range");
	body = sizeof(*h) + h->record_count * sizeof(*rec) + h->strings_size;
	if (body + SHA256_LEN != len)
		BAD(body + SHA256_LEN > len ? "truncated" : "trailing bytes after the checksum");
	if (sha256_buf(buf, body, sum))
		return -ENOMEM;
	if (memcmp(sum, buf + body, SHA256_LEN))
		BAD("checksum mismatch (corrupt trace)");
	rec = (const void *)(buf + sizeof(*h));
	strings = (const char *)(rec + h->record_count);
	if (strings[0] || strings[h->strings_size - 1])
		BAD("string table not NUL-delimited");
	if (h->version == TRACE_VERSION_DISK && !id_is_zero(h->snapshot_id))
		BAD("version 1 trace with a snapshot id");
	for (uint64_t i = 0; i < h->record_count; i++) {
		const struct trace_record *r = &rec[i];

		if (trace_record_is_ram(r)) {
			if (h->version == TRACE_VERSION_DISK)
				BAD("RAM record in a version 1 trace");
			if (r->file_off || r->disk_off % TRACE_RAM_PAGE || r->len % TRACE_RAM_PAGE)
				BAD("RAM record not in whole pages");
		} else if (r->path >= h->strings_size)
			BAD("record names a path outside the string table");
		else if (r->path && (strings[r->path - 1] || strings[r->path] != '/'))
			BAD("record path is not an absolute path at a string start");
		if (!r->len || r->disk_off + r->len < r->disk_off || r->file_off + r->len < r->file_off)
			BAD("record with an empty or wrapping range");
		if (i && r->t_us < rec[i - 1].t_us)
			BAD("records out of time order");
	}
	return 0;
}

int trace_parse(uint8_t *buf, size_t len, struct trace **out, char *why, size_t why_len)
{
	struct trace *t;
	int ret;

	if (why_len)
		why[0] = '\0';
	/* the records are read in place: the buffer must be aligned for them */
	if ((uintptr_t)buf % _Alignof(struct trace_header)) {
		free(buf);
		return -EINVAL;
	}
	ret = validate(buf, len, why, why_len);
	if (ret) {
		free(buf);
		return ret;
	}
	t = calloc(1, sizeof(*t));
	if (!t) {
		free(buf);
		return -ENOMEM;
	}
	t->buf = buf;
	t->buf_len = len;
	t->hdr = (const void *)buf;
	t->records = (const void *)(buf + sizeof(*t->hdr));
	t->n_records = t->hdr->record_count;
	t->strings = (const char *)(t->records + t->n_records);
	memcpy(t->digest, buf + len - SHA256_LEN, SHA256_LEN);
	*out = t;
	return 0;
}

int trace_load(const char *path, struct trace **out, char *why, size_t why_len)
{
	const uint64_t max = sizeof(struct trace_header) +
			     (uint64_t)TRACE_RECORDS_MAX * sizeof(struct trace_record) +
			     TRACE_STRINGS_MAX + SHA256_LEN;
	uint8_t *buf;
	size_t len;
	int ret;

	if (why_len)
		why[0] = '\0';
	ret = fs_read_file_max(path, max, &buf, &len);
	if (ret == -EINVAL)
		why_set(why, why_len, 0, "not a regular file"); /* a FIFO, a device: never opened */
	if (ret == -EFBIG) {
		why_set(why, why_len, 0, "too large for a trace");
		return -EBADMSG;
	}
	return ret ? ret : trace_parse(buf, len, out, why, why_len);
}

void trace_free(struct trace *t)
{
	if (!t)
		return;
	free(t->buf);
	free(t);
}

int trace_write(const char *path, struct trace_header *h, const struct trace_record *records,
		size_t n, const char *strings, size_t strings_size)
{
	size_t body = sizeof(*h) + n * sizeof(*records) + strings_size;
	uint8_t *buf = malloc(body + SHA256_LEN);
	int ret;

	if (!buf)
		return -ENOMEM;
	memcpy(h->magic, TRACE_MAGIC, 8);
	h->version = id_is_zero(h->snapshot_id) ? TRACE_VERSION_DISK : TRACE_VERSION;
	for (size_t i = 0; i < n && h->version == TRACE_VERSION_DISK; i++)
		if (trace_record_is_ram(&records[i]))
			h->version = TRACE_VERSION;
	h->header_size = sizeof(*h);
	h->record_count = n;
	h->strings_size = strings_size;
	memcpy(buf, h, sizeof(*h));
	if (n)
		memcpy(buf + sizeof(*h), records, n * sizeof(*records));
	memcpy(buf + sizeof(*h) + n * sizeof(*records), strings, strings_size);
	ret = sha256_buf(buf, body, buf + body);
	if (!ret)
		ret = fs_write_file_atomic(path, buf, body + SHA256_LEN, 0644);
	free(buf);
	return ret;
}

int trace_for_each_file(const struct trace *t, const struct manifest *m, trace_range_fn cb,
			void *arg, uint64_t *files, uint64_t *found)
{
	const struct mf_entry *e = NULL;
	uint32_t last = 0, cur = 0;  /* the newest path so far; the one e was looked up for */
	int ret;

	*files = *found = 0;
	for (size_t i = 0; i < t->n_records; i++) {
		const struct trace_record *r = &t->records[i];
		bool fresh;

		if (!r->path || trace_record_is_ram(r))
			continue; /* metadata, RAM */
		fresh = trace_record_new_file(r, &last);
		if (r->path != cur) {
			e = manifest_find(m, trace_path(t, r));
			if (e && e->type != MF_REG)
				e = NULL;
			cur = r->path;
		}
		if (fresh) {
			(*files)++;
			if (e)
				(*found)++;
		}
		if (e && (ret = cb(arg, e, r->file_off, r->len)))
			return ret;
	}
	return 0;
}
