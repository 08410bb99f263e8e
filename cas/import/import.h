/* SPDX-License-Identifier: MIT */
/* Importing images into the store: SRC → chunks in the store + one manifest file. */
#ifndef LZ_CAS_IMPORT_H
#define LZ_CAS_IMPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "../../common/why.h"
#include "../chunker.h"
#include "../store.h"
#include "tree.h"

/* Where an import is (its progress callback). */
struct import_progress {
	uint64_t files;         /* regular files read so far */
	uint64_t bytes;         /* file data read so far */
	uint64_t chunks;        /* chunks handed to the compressors */
	uint64_t chunks_done;   /* of those, hashed and (if new) compressed and stored */
	uint64_t stored_bytes;  /* compressed bytes of the new chunks stored */
	uint64_t src_done, src_size; /* a tar file SRC: its bytes read, of its size; else 0 */
	uint64_t fetched, fetch_size; /* docker://: blob bytes received, of their total */
	bool fetching;          /* docker://: the blobs are being fetched (nothing read yet) */
	bool finishing;         /* all read: the last chunks are being compressed and stored */
};

struct import_opts {
	const char *src;        /* DIR | FILE.tar[.gz|.zst|.xz] | oci:DIR[:TAG] | docker-archive:FILE
				   | oci-archive:FILE[:TAG] | docker://HOST[:PORT]/REPO[:TAG|@DIGEST] */
	const char *platform;   /* os/arch[/variant] an image index is resolved to; NULL: host's */
	bool insecure;          /* docker://: plain http (else https) */
	const char *store_dir;
	bool init;              /* make store_dir a store whatever it holds (store_init) */
	const char *output;     /* manifest path */
	uint32_t chunk_size;
	uint32_t pack_max;      /* files up to this size share packed chunks; 0: never */
	int level;
	unsigned threads;
	/*
	 * May be NULL. Called on the importing thread through the whole run: after each file
	 * and each chunk read, and while the last chunks are compressed and written. Keep it
	 * cheap (it is called often; rate-limit the drawing).
	 */
	void (*progress)(void *arg, const struct import_progress *p);
	void *progress_arg;
	/*
	 * Warnings (NOTE_WARN, one line each: an entry of unknown type skipped, the archive
	 * reader's own warning, an empty archive); the import goes on. fn NULL: none.
	 */
	struct note_sink notes;
	/*
	 * May be NULL. When *cancel becomes non-zero (read atomically: a signal's flag), the
	 * import stops at the next chunk, lets the chunks staged so far land (valid, unnamed by
	 * any manifest: cas gc removes them), writes no manifest, and returns -ECANCELED
	 * ("interrupted"). STORE/tmp is left empty.
	 */
	const int *cancel;
};

struct import_result {
	uint64_t entries;
	uint64_t file_bytes;         /* the image's: regular files of the final tree (what was
					whited out by a later layer is not in it) */
	uint64_t image_chunks;       /* distinct chunks the image's files are in */
	struct chunker_stats chunks; /* what went through the chunker, whited out or not */
	uint8_t digest[SHA256_LEN];
	double seconds;
};

/* What each source importer gets. */
struct archive;
struct import_ctx {
	struct tree *tree;
	struct chunker *chunker;
	const char *src_label;   /* for messages */
	char *config_json;       /* malloc'ed OCI image config, if the source has one */
	size_t config_len;
	uint64_t files, bytes;   /* progress */
	struct archive *src_archive; /* a tar file SRC being read (its position), or NULL */
	uint64_t src_size;       /* its size */
	uint32_t pack_max;       /* see import_opts */
	struct chunk_buf *pack;  /* the packed chunk being filled */
	const struct import_opts *o; /* its progress and warn callbacks; NULL: none */
	struct store *store;     /* where the chunks go (and STORE/tmp, for staged blobs) */
	char *why;               /* the first failure's reason (why_len bytes, may be 0;
				    why_first) */
	size_t why_len;
};

/*
 * Runs the whole import. 0, or -errno (-EBADMSG etc.) with one line in why (why_len bytes,
 * may be 0), e.g. "oci:DIR: layer 2 sha256:...: digest mismatch: content is sha256:...";
 * the output file is not written. why is empty when the layer below has said why already
 * through the logger (libarchive that cannot be loaded). Prints nothing.
 */
int import_run(const struct import_opts *o, struct import_result *res, char *why,
	       size_t why_len);

/*
 * For the importers, all on the importing thread: a failure's reason goes into ic->why with
 * why_first() (the first one only: an outer caller does not overwrite it); a warning goes to
 * the caller's callback.
 */
void import_warn(struct import_ctx *ic, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Before the store is opened: 0, or -EINVAL with the reason when SRC would import as
 * something else than the image it holds (an OCI layout or an unpacked docker archive as a
 * plain DIR, a docker or OCI image archive as a plain FILE.tar) or names a transport lazyblk
 * does not have (docker://…, oci-archive:…; a path that exists is never one).
 */
int import_check_source(struct import_ctx *ic, const char *src);

/*
 * The deepest path an import takes, in components from the image's root ("a/b/c" is 3):
 * members of tars and of layers, and entries of directory trees alike. A deeper one is
 * refused, its message ending with IMPORT_TOO_DEEP. It bounds the recursion of the
 * directory walk and of the tree's writer (tree.c), and the descriptors the walk holds.
 */
#define IMPORT_MAX_DEPTH 2048
#define IMPORT_STR_(x) #x
#define IMPORT_STR(x) IMPORT_STR_(x)
#define IMPORT_TOO_DEEP \
	"path deeper than " IMPORT_STR(IMPORT_MAX_DEPTH) " levels (the import's limit)"

/* A path for a message: itself, or its start and its end around "..." when long. */
#define IMPORT_BRIEF_MAX 256
const char *import_brief(const char *path, char buf[IMPORT_BRIEF_MAX]);

/* Sources. Each says why in ic->why before returning non-zero (why_first). */
int import_dir(struct import_ctx *ic, const char *dir);
int import_tar_file(struct import_ctx *ic, const char *path);

struct archive;
/*
 * Apply one tar stream to the tree as layer `layer`. With `whiteouts`, OCI/docker
 * whiteout entries (.wh.NAME, .wh..wh..opq) delete from lower layers instead of being
 * stored. `what` names the stream in messages.
 */
int import_tar_archive(struct import_ctx *ic, struct archive *a, uint32_t layer, bool whiteouts,
		       const char *what);
int import_oci(struct import_ctx *ic, const char *spec);            /* "DIR[:TAG]" */
int import_docker_archive(struct import_ctx *ic, const char *file);
int import_registry(struct import_ctx *ic, const char *ref);   /* "HOST[:PORT]/REPO[:TAG|@D]" */
int import_oci_archive(struct import_ctx *ic, const char *spec); /* "FILE[:TAG]" */

/*
 * Read a whole regular file's content through the chunker into ino (chunks + holes).
 * maybe_sparse: the file may have holes (st_blocks says so), look for them.
 */
int import_file_data(struct import_ctx *ic, struct tree_inode *ino, int fd, uint64_t size,
		     bool maybe_sparse);
void import_progress(struct import_ctx *ic);
/* chunker_wait's tick (import_run.c): the last chunks being compressed and stored. */
void import_progress_finishing(void *arg);
/* The caller's cancel flag is set (a signal came): stop at the next chunk. */
bool import_cancelled(const struct import_ctx *ic);
/* Submit the partly filled packed chunk, if any. */
int import_pack_flush(struct import_ctx *ic);

/* Streaming file data (tar): pieces in order, holes as gaps. */
struct import_stream {
	struct import_ctx *ic;
	struct tree_inode *ino;
	struct chunk_buf *buf;   /* own chunk being filled (unpacked mode) */
	uint8_t *packed;         /* unpacked: NULL; packed: the file's bytes in ic->pack */
	uint64_t size;           /* packed: reserved length */
	uint64_t pos;
};
/* size: the declared size; sparse: the data may have gaps (never packed). */
int import_stream_begin(struct import_ctx *ic, struct import_stream *st, struct tree_inode *ino,
			uint64_t size, bool sparse);
int import_stream_write(struct import_stream *st, const void *data, size_t len);
int import_stream_hole(struct import_stream *st, uint64_t len);
int import_stream_end(struct import_stream *st, uint64_t size); /* trailing hole up to size */
void import_stream_abort(struct import_stream *st);

/* Xattrs sorted by name, so the manifest does not depend on listxattr order. */
void import_sort_xattrs(struct mf_xattr_in *x, uint32_t n);

#endif
