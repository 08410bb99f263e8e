/* SPDX-License-Identifier: MIT */
/* blkd/disk: what every disk shares (see disk.h). */
#include "disk.h"

#include <string.h>

int disk_check(const struct disk *d)
{
	const struct disk_ops *o = d ? d->ops : NULL;

	if (!o || !o->read || !o->write || !o->flush || d->size % DISK_SECTOR)
		return -EINVAL;
	if ((d->can_discard && !o->discard) || (d->can_write_zeroes && !o->write_zeroes) ||
	    (d->can_snapshot && !o->snapshot) || (d->status && !o->block_status) ||
	    d->status >= DISK_CTX_BIT(DISK_CTX_COUNT))
		return -EINVAL;
	return 0;
}

void disk_close(struct disk *d)
{
	if (d->ops && d->ops->close)
		d->ops->close(d->ctx);
	memset(d, 0, sizeof(*d));
}

/* ---- the generic sparse read: block status, each data extent read as it comes */

struct sparse {
	const struct disk *d;
	uint64_t off, pos, end;    /* the request; told up to pos */
	uint8_t *buf;              /* byte off */
	disk_extent_fn cb;
	void *arg;
	int err;                   /* a read failed, or cb did */
	bool whole;                /* cb wants no more: the rest is read whole */
};

static int sparse_extent(void *arg, uint64_t off, uint64_t len, uint32_t flags)
{
	const uint32_t zero = DISK_STATUS_HOLE | DISK_STATUS_ZERO;
	struct sparse *s = arg;
	int ret;

	if (off != s->pos)
		return 1; /* not consecutive: the rest is read whole */
	if (len > s->end - off)
		len = s->end - off;
	if (!len)
		return 0;
	if ((flags & zero) != zero) {
		ret = s->d->ops->read(s->d->ctx, off, (uint32_t)len, s->buf + (off - s->off));
		if (ret)
			return s->err = ret;
	}
	s->pos += len;
	ret = s->cb(s->arg, off, len, flags);
	if (ret < 0)
		return s->err = ret;
	if (ret > 0)
		s->whole = true;
	return ret > 0 || s->pos == s->end;
}

int disk_read_sparse(const struct disk *d, uint64_t off, uint32_t len, void *buf,
		     disk_extent_fn cb, void *arg)
{
	struct sparse s = { d, off, off, off + len, buf, cb, arg, 0, false };
	int ret;

	if (d->ops->read_sparse)
		return d->ops->read_sparse(d->ctx, off, len, buf, cb, arg);
	if (!len)
		return 0;
	/* a status that fails (or none): what is left is data */
	disk_block_status(d, DISK_CTX_ALLOCATION, off, len, sparse_extent, &s);
	if (s.err)
		return s.err;
	if (s.pos == s.end)
		return 0;
	ret = d->ops->read(d->ctx, s.pos, (uint32_t)(s.end - s.pos), s.buf + (s.pos - off));
	if (ret || s.whole)
		return ret;
	ret = cb(arg, s.pos, s.end - s.pos, 0);
	return ret < 0 ? ret : 0;
}
