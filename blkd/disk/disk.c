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
