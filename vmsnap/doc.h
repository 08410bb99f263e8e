/* SPDX-License-Identifier: MIT */
/*
 * The VM snapshot document (docs/formats.md, "VM snapshot document"): one small JSON
 * object naming everything a snapshot is made of, all of it chunks of the store (verified
 * by sha256 like every chunk) but the disk, which is a layout chain (a committed layer on
 * its base image). Its own sha256 is the snapshot's id; a tag names it through an OCI
 * manifest (or an HTTP store's image.json), so a restore by tag is verified end to end.
 *
 *   {"mediaType":"application/vnd.lazyblk.vm-snapshot.v1+json","version":1,
 *    "created":"2026-12-08T10:00:00Z",
 *    "machine":{"mem":1073741824,"cpus":1,"cpu":"<32 hex: vm.state's CPU signature>",
 *               "cpuModel":"..."},
 *    "kernel":"sha256:<hex>",
 *    "state":{"digest":"sha256:<hex>","size":N},
 *    "ram":{"map":[{"digest":"sha256:<hex>","size":N},...],"pages":N,"chunks":N,
 *           "bytes":N},
 *    "disk":{"layout":"sha256:<layout digest hex>","size":N},         (optional)
 *    "parent":"sha256:<the snapshot document this one was taken after>" (optional)}
 *
 * state: the vm.state bytes (vmm-glue/vm_snapshot.h) as one chunk; ram.map: the page map
 * (vmsnap/rammap.h) as chunks, in order; ram.pages/chunks/bytes: its non-zero pages, the
 * distinct chunks it refers to and their uncompressed bytes (what a restore may fetch);
 * disk.layout: the top of the disk's layout chain (absent: the VM had no image disk).
 *
 * Built as fixed-order JSON without white space (the same inputs give the same bytes). The
 * parser is strict (json-c; unknown keys refused, digests sha256:<64 lowercase hex>, sizes
 * in range, version 1 only: a newer one is refused by name) and takes outside input. What
 * both check beyond the syntax: created up to 9999-12-31T23:59:59Z; mem a multiple of 4096
 * up to RAMMAP_MEM_MAX; cpus 1..255; cpuModel up to 63 bytes of printable ASCII without
 * quotes or backslashes; state.size 1..SNAPDOC_STATE_MAX; 1..SNAPDOC_MAP_MAX map pieces of
 * 1..SNAPDOC_MAP_PIECE_MAX bytes, together exactly the length of a page map of ram.chunks
 * chunks over mem (64 + 40 x chunks + 8 x mem / 4096); pages <= mem / 4096, chunks <= pages
 * (both 0 or neither), bytes a multiple of 4096 from 4096 x chunks to 4 MiB x chunks;
 * disk.size > 0. Nothing here prints.
 */
#ifndef LZ_VMSNAP_DOC_H
#define LZ_VMSNAP_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/sha256.h"
#include "../common/test_hook.h"
#include "../common/why.h"

#define SNAPDOC_MEDIA_TYPE "application/vnd.lazyblk.vm-snapshot.v1+json"
#define SNAPDOC_VERSION 1u
#define SNAPDOC_MAP_MAX 256u          /* page map pieces */
#define SNAPDOC_MAP_PIECE_MAX (1u << 20) /* bytes of one piece */
#define SNAPDOC_MAX (64u << 10)       /* bytes of a document */
#define SNAPDOC_STATE_MAX (64u << 20) /* bytes of its vm.state */
#define SNAPDOC_CPU_SIG 16u

struct snapdoc_blob {
	uint8_t digest[SHA256_LEN];   /* a chunk's name: sha256 of its bytes */
	uint64_t size;                /* its uncompressed bytes */
};

struct snapdoc {
	uint64_t created;             /* seconds since the epoch */
	uint64_t mem_size;            /* bytes */
	uint32_t ncpus;
	uint8_t cpu_sig[SNAPDOC_CPU_SIG];
	char cpu_model[64];           /* for messages ("" if unknown) */
	uint8_t kernel[SHA256_LEN];   /* sha256 of the kernel it booted */
	struct snapdoc_blob state;
	struct snapdoc_blob map[SNAPDOC_MAP_MAX];
	unsigned nmap;                /* >= 1 */
	uint64_t ram_pages, ram_chunks, ram_bytes;
	bool has_disk;
	uint8_t layout[SHA256_LEN];   /* the disk's top layout digest */
	uint64_t disk_size;           /* bytes */
	bool has_parent;
	uint8_t parent[SHA256_LEN];
};

/*
 * d as the document's bytes (malloc'd, NUL-terminated, *len without it). -ENOMEM, -EINVAL
 * (d is not what snapdoc_parse would take).
 */
TEST_HOOK
int snapdoc_build(const struct snapdoc *d, char **json, size_t *len);
/*
 * Parse and check (untrusted). -EBADMSG with one line in why ("snapshot document: ram.map:
 * ..."), -EPROTONOSUPPORT for a newer version or another mediaType ("a lazyblk disk image,
 * not a VM snapshot" when its mediaType or artifactType is a lazyblk image's, IMAGE_MT_JSON
 * or IMAGE_ARTIFACT), -EFBIG beyond SNAPDOC_MAX, -ENOMEM. *d is zeroed on failure.
 */
int snapdoc_parse(const char *json, size_t len, struct snapdoc *d, char *why, size_t why_len);

#endif
