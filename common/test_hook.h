/* SPDX-License-Identifier: MIT */
/*
 * TEST_HOOK marks a declaration exported only so that tests/unit can reach it: nothing else
 * in lazyblk calls it (scripts/check-lib.sh keeps the marks true both ways). It expands to
 * nothing.
 */
#ifndef LZ_COMMON_TEST_HOOK_H
#define LZ_COMMON_TEST_HOOK_H

#define TEST_HOOK

#endif
