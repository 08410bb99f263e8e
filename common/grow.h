/* SPDX-License-Identifier: MIT */
/* Growing a heap array in place: the one helper for arrays whose final size is not known. */
#ifndef LZ_COMMON_GROW_H
#define LZ_COMMON_GROW_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * Make *p (an array of *cap elements of elem bytes) hold at least need elements: when it
 * does not, or when nothing is allocated yet (*cap 0), the capacity becomes first (if *cap
 * is 0) or *cap, doubled until it holds need, and *p is realloc'd to it. Elements already
 * there keep their values; new ones are not initialised.
 *
 * Returns *p, never NULL on success (even for need 0); NULL for out of memory or a size
 * that overflows, with *p and *cap unchanged (the caller still owns and frees *p).
 * first must not be 0. Callers append with
 *
 *	if (!grow((void **)&a, &cap, n + 1, sizeof(*a)))
 *		return -ENOMEM;
 *	a[n++] = x;
 */
static inline void *grow_from(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need > *cap || !*cap) {
		size_t c = *cap ? *cap : first;
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

/* grow_from() with a first capacity of 64 elements. */
static inline void *grow(void **p, size_t *cap, size_t need, size_t elem)
{
	return grow_from(p, cap, need, elem, 64);
}

#endif
