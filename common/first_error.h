/* SPDX-License-Identifier: MIT */
/* For worker threads that stop at the first failure: the first error is the one kept. */
#ifndef LZ_COMMON_FIRST_ERROR_H
#define LZ_COMMON_FIRST_ERROR_H

#include <stdbool.h>

/* Store err (non-zero) in *slot unless an error is there already; the others are dropped. */
static inline void first_error_set(int *slot, int err)
{
	int none = 0;

	__atomic_compare_exchange_n(slot, &none, err, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* The error kept so far, 0 if none: workers check it to stop early. */
static inline int first_error_get(const int *slot)
{
	return __atomic_load_n(slot, __ATOMIC_RELAXED);
}

#endif
