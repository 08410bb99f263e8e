/* SPDX-License-Identifier: MIT */
/* The lazyblk command line: a thin layer over the modules' APIs. */
#ifndef LZ_CLI_H
#define LZ_CLI_H

struct cli_cmd {
	const char *name;
	const char *summary;
	int (*run)(int argc, char **argv);  /* argv[0] is the subcommand name */
};

int cmd_import(int argc, char **argv);
int cmd_manifest(int argc, char **argv);
int cmd_cas(int argc, char **argv);
int cmd_mkfs(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_initramfs(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_overlay(int argc, char **argv);
int cmd_commit(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_images(int argc, char **argv);
int cmd_trace(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_repack(int argc, char **argv);

/* Exit codes: 0 ok, 1 failure, 2 usage error. */
#define EXIT_USAGE 2

/* "lazyblk: CMD: unknown option ... (see lazyblk CMD --help)" and EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* For getopt_long's '?' / ':' returns (optstring starts with ':', opterr = 0). */
int cli_bad_option(const char *cmd, char **argv, int c);

/*
 * -v/--verbose, -q/--quiet, -p/--progress and --no-progress, before the subcommand (main.c)
 * or among its options: every command adds CLI_LOG_OPTIONS to its getopt_long table, "vqp"
 * to its optstring and `CLI_LOG_CASES: cli_log_option(c); break;` to its switch.
 */
#define CLI_O_NO_PROGRESS 0x1200
#define CLI_LOG_OPTIONS \
	{ "verbose", no_argument, NULL, 'v' }, \
	{ "quiet", no_argument, NULL, 'q' }, \
	{ "progress", no_argument, NULL, 'p' }, \
	{ "no-progress", no_argument, NULL, CLI_O_NO_PROGRESS }
#define CLI_LOG_CASES case 'v': case 'q': case 'p': case CLI_O_NO_PROGRESS
void cli_log_option(int c);

/*
 * The library's one-shot calls (docs/conventions.md): cli_note prints their notes (a
 * struct note_sink's fn: warnings with log_warn, notices unless -q, details at -v / -vv);
 * cli_fail prints a failure's reason, one line, unless it is empty (the layers below said
 * why already), and returns err.
 */
#include "../common/why.h"
#define CLI_NOTES ((struct note_sink){ .fn = cli_note })
void cli_note(void *arg, enum note_kind kind, const char *line);
int cli_fail(int err, const char *why);
/*
 * An -o PATH a command is about to write (a new file renamed into place): 0, or 1 after one
 * line when PATH is a directory, a device, a FIFO or a socket (common/fsutil.h).
 */
int cli_output_check(const char *path);
/*
 * For a one-shot command that writes files (cli/interrupt.c): SIGINT and SIGTERM no longer
 * kill the process but set the flag returned, the library's cancel (non-zero: stop, clean
 * up, return -ECANCELED); a second signal kills. Call before the library starts threads.
 * NULL (signals left as they were) if a thread cannot be had. The command then ends with
 * one line, "interrupted", and exits CLI_EXIT_INTERRUPTED.
 */
const int *cli_interrupt_catch(void);
#define CLI_EXIT_INTERRUPTED 130

#include <stdbool.h>

/*
 * The remote options shared by serve, export and run: add CLI_REMOTE_OPTIONS to the
 * getopt_long table, pass every option code to cli_remote_option (1: taken, 0: not a remote
 * option, -1: bad value, the usage error printed), and cli_remote_help to --help.
 */
#include <stdbool.h>
#include <stdint.h>

enum {
	CLI_O_REMOTE = 0x1000,
	CLI_O_CACHE_SIZE,
	CLI_O_FETCH_CONC,
	CLI_O_FETCH_TIMEOUT,
	CLI_O_FETCH_RETRIES,
	CLI_O_NO_PLAIN,
	CLI_O_TRACE_RECORD = 0x1100,
	CLI_O_PREFETCH,
	CLI_O_PREFETCH_ALL,
	CLI_O_READAHEAD,
};
#define CLI_REMOTE_OPTIONS \
	{ "remote", required_argument, NULL, CLI_O_REMOTE }, \
	{ "cache-size", required_argument, NULL, CLI_O_CACHE_SIZE }, \
	{ "fetch-concurrency", required_argument, NULL, CLI_O_FETCH_CONC }, \
	{ "fetch-timeout", required_argument, NULL, CLI_O_FETCH_TIMEOUT }, \
	{ "fetch-retries", required_argument, NULL, CLI_O_FETCH_RETRIES }, \
	{ "no-plain", no_argument, NULL, CLI_O_NO_PLAIN }

struct cli_remote {
	const char *url;
	uint64_t cache_size;
	unsigned concurrency, timeout_ms;
	int retries;  /* 0: default, < 0: none */
	bool no_plain;
};
extern const char cli_remote_help[];
int cli_remote_option(struct cli_remote *r, int c, const char *arg);
/* After parsing: EXIT_USAGE (said why) for --cache-size without --remote, else 0. */
int cli_remote_check(const struct cli_remote *r);
struct cas_source_opts;
/*
 * IMAGE.layout, or an image by reference (oci://HOST/REPO:TAG, http(s)://HOST/PATH/images/NAME;
 * cli/image_cli.c): for a reference, the image's layouts are fetched (verified) into
 * STORE/layouts/, *layout becomes the top one's path and r->url the image's chunk remote
 * unless --remote gave one. 0, or 1 with one line printed. Free with cli_image_free after use.
 */
struct image_fetched;
struct cli_image {
	struct image_fetched *f;
};
int cli_image_resolve(const char *arg, const char *store_dir, struct cli_remote *r,
		      struct cli_image *img, const char **layout);
void cli_image_free(struct cli_image *img);
/*
 * The files of the opened layout l's chain (path: how it was opened), top first, and their
 * layout digests: what push publishes. Valid while l is open.
 */
/*
 * cas gc --keep: the chunks of a layout or manifest file, or of every layout of an image by
 * reference (fetched into STORE/layouts/), added to refs. 0, or 1 (said why).
 */
struct chunk_refs;
int cli_keep_add(struct chunk_refs *refs, const char *keep, const char *store_dir);
/*
 * lazyblk cas gc --remote URL (cli/cas_gc_remote.c): 0, 1 or EXIT_USAGE (said why). grace:
 * an http(s) store's files uploaded less than grace seconds ago stay.
 */
int cli_cas_gc_remote(const char *url, const char *const *keep, size_t n_keep,
		      const char *store_dir, uint64_t grace, bool dry_run);
/*
 * lazyblk push --remote REF SNAPSHOT (cli/push_snap.c): a VM snapshot (a directory holding
 * snapshot.json, or the file) published by name. 0, 1 or CLI_EXIT_INTERRUPTED (said why).
 */
struct cas_push_opts;
int cli_push_snapshot(const struct cas_push_opts *po, const char *snap, bool json);
struct layout;
/*
 * The files of a layout's chain, top first (path for the top, as the user gave it), and
 * their layout digests: *paths is one malloc'ed block holding both arrays (free(*paths));
 * valid while l is open. -ENOMEM.
 */
int image_layout_files(const struct layout *l, const char *path, const char ***paths,
		       const uint8_t (**digests)[32], unsigned *n);
void cli_remote_to_source(const struct cli_remote *r, struct cas_source_opts *so);
/*
 * Boot traces and prefetch (serve, run): add CLI_TRACE_OPTIONS to the getopt_long table (and
 * a --manifest option of the command's own), pass every option code to cli_trace_option
 * (1: taken, 0: not ours), cli_trace_help to --help. cli_trace_to_spec: after parsing,
 * finds the manifest (--manifest, else IMAGE.manifest beside IMAGE.layout) when a trace
 * option needs it; EXIT_USAGE (said why) if there is none.
 */
struct disk;
struct disk_spec;
#define CLI_TRACE_OPTIONS \
	{ "trace-record", required_argument, NULL, CLI_O_TRACE_RECORD }, \
	{ "prefetch", required_argument, NULL, CLI_O_PREFETCH }, \
	{ "prefetch-all", no_argument, NULL, CLI_O_PREFETCH_ALL }, \
	{ "readahead", required_argument, NULL, CLI_O_READAHEAD }

struct cli_trace {
	const char *manifest;   /* the command's --manifest */
	const char *record, *prefetch;
	bool prefetch_all;
	int readahead;          /* -1: none, 0: default, N chunks (--readahead) */
	char *found;            /* the manifest found beside the layout (owned) */
};
extern const char cli_trace_help[];
/* 1: taken, 0: not ours, -1: bad value (the usage error printed). */
int cli_trace_option(struct cli_trace *t, int c, const char *arg);
/*
 * The default: branch of a serving command's option loop (serve, run): the trace options,
 * then the remote ones. 1 taken, 0 (with the usage line printed) an unknown option, < 0 a
 * bad value (usage printed): return EXIT_USAGE on either of those.
 */
int cli_serving_option(const char *cmd, char **argv, struct cli_trace *t, struct cli_remote *r,
		       int c, const char *arg);
int cli_trace_to_spec(struct cli_trace *t, const char *layout, struct disk_spec *ds);
/* The manifest a trace needs (--manifest, else beside the layout); EXIT_USAGE, said why. */
int cli_trace_manifest(struct cli_trace *t, const char *layout, const char **path);
/* At exit: write the trace if still recording; prints what it did. 0, or 1 on failure. */
int cli_trace_finish(struct cli_trace *t, const struct disk *d);
void cli_trace_free(struct cli_trace *t);

/*
 * Every size option: arg (common/size.h: digits and K, M, G or T, powers of 1024; a bare
 * number counts unit bytes) from min to max (UINT64_MAX: no bound). 0, or EXIT_USAGE with the
 * one message of all of them said: "--mem: '10Q' is not a size from 4M to 1T (a number with
 * K, M, G or T: powers of 1024...)".
 */
int cli_parse_size(const char *opt, const char *arg, uint64_t unit, uint64_t min, uint64_t max,
		   uint64_t *out);

/*
 * --json (cli/json_summary.c): members of a summary object, a digest as "sha256:HEX", a path
 * as a string ("KEY_hex" if it is no UTF-8); cli_json_print prints the object and a newline
 * on stdout and frees it: 0, or 1 when it could not be built (said why).
 */
struct json_buf;
void cli_json_digest(struct json_buf *b, const char *key, const uint8_t *digest);
void cli_json_path(struct json_buf *b, const char *key, const char *path);
int cli_json_print(struct json_buf *b);

/* --chunk-size (4K..64M) and --level (zstd, 1..19): 0, or EXIT_USAGE with the error said. */
int cli_parse_chunk_size(const char *arg, uint32_t *out);
int cli_parse_level(const char *arg, int *out);

/*
 * The disk's statistics as one JSON object in path (--stats-json), written atomically
 * (fs_write_file_atomic: a new file of FS_DATA_MODE renamed over path; a link there is
 * replaced, never followed; a FIFO or a device there is refused). -errno, said why.
 */
struct disk;
int cli_write_stats_json(const struct disk *d, const char *path);

/*
 * The OCI image config (Entrypoint, Cmd, Env, WorkingDir, User) kept in an image manifest,
 * for the initramfs (run, initramfs). *found: the manifest has one. Prints one line on error.
 */
#include <stdbool.h>
struct oci_config;
int cli_image_config_load(const char *manifest, struct oci_config *cfg, bool *found);

#endif
