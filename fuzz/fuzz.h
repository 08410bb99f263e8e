/* SPDX-License-Identifier: MIT */
/*
 * What the fuzz targets share (fuzz/README.md): a quiet logger, a scratch directory per
 * process, writing the input to a file, and the checksum fix-ups.
 *
 * The stored formats end in a sha256 and some carry a header crc32c. An attacker who can
 * write a file can compute them, so the targets recompute them on the mutated input before
 * handing it to the reader: the fuzzer then explores what lies behind the checksum instead
 * of being refused at it every time. Header-only: each target is one .c file.
 */
#ifndef LZ_FUZZ_H
#define LZ_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/crc32c.h"
#include "../common/log.h"
#include "../common/sha256.h"
#include "../common/why.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char fuzz_dir_path[PATH_MAX];

static int fuzz_rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(p);
	return 0;
}

/* Remove path and everything under it. */
static inline void fuzz_rmtree(const char *path)
{
	nftw(path, fuzz_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void fuzz_cleanup(void)
{
	if (fuzz_dir_path[0])
		fuzz_rmtree(fuzz_dir_path);
}

/*
 * Once per process: the library's log lines off (only the first error line of the run is
 * printed, warnings never), and a scratch directory under $TMPDIR, removed at exit.
 */
static inline const char *fuzz_dir(void)
{
	if (!fuzz_dir_path[0]) {
		const char *t = getenv("TMPDIR");

		log_first_error_only(true);
		snprintf(fuzz_dir_path, sizeof(fuzz_dir_path), "%s/lazyblk-fuzz-XXXXXX",
			 t && *t ? t : "/tmp");
		if (!mkdtemp(fuzz_dir_path))
			abort();
		atexit(fuzz_cleanup);
	}
	return fuzz_dir_path;
}

/*
 * With FUZZ_VERBOSE set in the environment, say what became of an input (to check that a
 * seed gets as deep as meant: build/fuzz/fuzz_T FILE): the reader's result and reason.
 */
static inline int fuzz_result(const char *what, int ret, const char *why)
{
	static int verbose = -1;

	if (verbose < 0)
		verbose = getenv("FUZZ_VERBOSE") != NULL;
	if (verbose)
		fprintf(stderr, "fuzz: %s: %d (%s)%s%s\n", what, ret, strerror(ret < 0 ? -ret : 0),
			why && *why ? ": " : "", why ? why : "");
	return ret;
}

/* DIR/name in buf. */
static inline const char *fuzz_path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", fuzz_dir(), name);
	return buf;
}

/* Write the bytes as the whole of path (truncated first). Aborts on failure: a harness bug. */
static inline void fuzz_write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	const uint8_t *p = data;

	if (fd < 0)
		abort();
	while (len) {
		ssize_t n = write(fd, p, len);

		if (n <= 0)
			abort();
		p += n;
		len -= (size_t)n;
	}
	close(fd);
}

/* A malloc'ed copy (the readers that take ownership of their buffer get one). */
static inline uint8_t *fuzz_dup(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size ? size : 1);

	if (!p)
		abort();
	memcpy(p, data, size);
	return p;
}

/*
 * The input past its first byte (which picks what to feed) as a malloc'ed C string: size - 1
 * bytes and a NUL (a NUL among them ends the string early, as a C reader would see it).
 */
static inline char *fuzz_cstr_after_first(const uint8_t *data, size_t size)
{
	char *s = malloc(size);

	if (!s)
		abort();
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	return s;
}

/* The trailing sha256 of every byte before it (manifest, trace, delta). */
static inline void fuzz_fix_sha_trailer(uint8_t *buf, size_t len)
{
	if (len >= SHA256_LEN)
		sha256_buf(buf, len - SHA256_LEN, buf + len - SHA256_LEN);
}

/* A header crc32c (seeded with ~0, not inverted) at crc_off over hdr_len bytes. */
static inline void fuzz_fix_crc(uint8_t *buf, size_t len, size_t hdr_len, size_t crc_off)
{
	uint32_t c;

	if (len < hdr_len || crc_off + 4 > hdr_len)
		return;
	memset(buf + crc_off, 0, 4);
	c = crc32c(~0u, buf, hdr_len);
	memcpy(buf + crc_off, &c, 4);
}

/* Little-endian u64 at off, or 0 past the end. */
static inline uint64_t fuzz_le64(const uint8_t *buf, size_t len, size_t off)
{
	uint64_t v = 0;

	if (off + 8 <= len)
		memcpy(&v, buf + off, 8);
	return v;
}

#endif
