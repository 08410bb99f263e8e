/* SPDX-License-Identifier: MIT */
/* Inside the layout reader: shared by layout.c (one file) and layout_chain.c (chains). */
#ifndef LZ_EXT4GEN_LAYOUT_INT_H
#define LZ_EXT4GEN_LAYOUT_INT_H

#include "layout.h"

/*
 * One file, verified, as it is: a one-layer struct layout whose runs are the file's own
 * (a version 2 file's zero runs among its data runs); layers[0].hint is its parent hint.
 * oflags: 0 or O_NOFOLLOW, for fs_open_regular (a file that is not regular: -EINVAL, *why
 * "not a regular file"; never opened).
 */
int layout_load_file(const char *path, int oflags, struct layout **out, const char **why);

#endif
