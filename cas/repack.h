/* SPDX-License-Identifier: MIT */
/*
 * lazyblk repack: a new manifest of the same image whose boot set — the file byte ranges a
 * recorded trace read — sits in chunks of its own, packed in the order the trace read it,
 * so a cold start fetches (nearly) only the bytes it reads, in few requests. The rest of
 * every file keeps referring to the chunks it had (a piece may name any byte range of a
 * chunk), so repacking adds only the boot set's chunks to the store; the content-addressed
 * store deduplicates them against everything there. The file tree is unchanged: the new
 * manifest makes the same filesystem, file for file and byte for byte.
 */
#ifndef LZ_CAS_REPACK_H
#define LZ_CAS_REPACK_H

#include <stdint.h>

#include "chunker.h"
#include "source.h"

struct repack_opts {
	const char *manifest_path;
	const char *trace_path;
	const char *out_path;
	struct cas_source_opts src;  /* where the image's chunks are; new chunks go there */
	uint32_t chunk_size;         /* of the boot chunks (0: the manifest's) */
	int level;                   /* zstd level */
};

struct repack_result {
	uint64_t files;              /* regular files of the image the trace read */
	uint64_t files_missing;      /* paths of the trace that are not regular files here */
	uint64_t boot_bytes;         /* file bytes moved into boot chunks */
	struct chunker_stats chunks; /* the boot chunks (new ones, and ones the store had) */
	uint8_t digest[SHA256_LEN];  /* of the new manifest */
};

/*
 * 0, or -errno with one line in why (why_len bytes, may be 0), e.g. "TRACE: none of the 4
 * files it read is a regular file of IMAGE.manifest (...)"; nothing is left at out_path.
 * why is empty when the chunk tiers below have said why already through the logger (a
 * chunk missing or corrupt, a store or remote that cannot be used). Prints nothing.
 */
int repack_run(const struct repack_opts *o, struct repack_result *res, char *why,
	       size_t why_len);

#endif
