/* SPDX-License-Identifier: MIT */
/*
 * Text that lazyblk does not control (a registry's tags and URLs, an HTTP store's answers,
 * an image's file names and strings, a trace's paths), made safe to print on a terminal or
 * in a log line (docs/security.md, "Text output"). The one escape of lazyblk: every text
 * output goes through it, the logger's lines included.
 *
 * Kept as they are: printable ASCII (0x20-0x7e) and valid UTF-8 of other characters.
 * Written as \xHH (C style, two lowercase hex digits), byte by byte:
 *   - the control bytes 0x00-0x1f and DEL 0x7f (escape sequences, carriage returns,
 *     newlines that forge a line);
 *   - bytes that are not valid UTF-8 (overlong forms, surrogates, beyond U+10FFFF, cut
 *     sequences): a terminal in an 8-bit mode takes 0x9b for CSI;
 *   - the UTF-8 of the C1 controls U+0080-U+009F (some terminals obey them), of the
 *     characters that reorder or break a line: U+061C, U+200E, U+200F, U+2028-U+202E,
 *     U+2066-U+2069 (bidirectional overrides: "Trojan Source"), and of those that cannot
 *     be seen: U+00AD, U+200B-U+200D, U+2060-U+2064, U+FEFF (a tag "lat\u200best" would
 *     print as "latest").
 * A backslash is written \\, so that the escaped text reads back unambiguously (esc_line
 * leaves it alone: a line whose pieces were escaped already).
 *
 * Output never exceeds out_len bytes (NUL included); text that does not fit is cut at a
 * character or escape boundary and ends with "..." (as much of it as fits). ESC_LEN(n) bytes
 * always suffice.
 */
#ifndef LZ_COMMON_ESC_H
#define LZ_COMMON_ESC_H

#include <stddef.h>

#include "test_hook.h"

#define ESC_LEN(n) (4 * (n) + 1)

/* len bytes at s escaped into out; returns out ("" when out_len is 0: nothing written). */
TEST_HOOK
const char *esc_bytes(const void *s, size_t len, char *out, size_t out_len);
/* A NUL-terminated string (NULL reads as ""). */
const char *esc_str(const char *s, char *out, size_t out_len);
/* As esc_str, but a backslash is kept: for a whole line made of pieces escaped already. */
const char *esc_line(const char *s, char *out, size_t out_len);

#endif
