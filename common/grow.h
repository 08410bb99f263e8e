/* SPDX-License-Identifier: MIT */
/* Growing a heap array in place: the one helper for arrays whose final size is not known. */
#ifndef LZ_COMMON_GROW_H
#define LZ_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Make *p (an array of *cap elements of elem bytes) hold at least need elements, doubling
 * from 64. Returns *p, or NULL (out of memory, or a size that overflows) with *p and *cap
 * unchanged.
 */
static inline void *grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need > *cap) {
		size_t c = *cap ? *cap : 64;
		void *n;

		while (c < need) {
			if (c > SIZE_MAX / 2)
				return NULL;
			c *= 2;
		}
		if (c > SIZE_MAX / elem)
			return NULL;
		n = realloc(*p, c * elem);
		if (!n)
			return NULL;
		*p = n;
		*cap = c;
	}
	return *p;
}

#endif
