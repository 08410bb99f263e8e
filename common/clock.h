/* SPDX-License-Identifier: MIT */
/* Elapsed time on CLOCK_MONOTONIC. */
#ifndef LZ_COMMON_CLOCK_H
#define LZ_COMMON_CLOCK_H

#include <time.h>

/* Milliseconds from t0 to now. */
static inline double clock_ms_since(const struct timespec *t0)
{
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &now);
	return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

#endif
