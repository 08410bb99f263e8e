/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the overlay across crashes (blkd/overlay/ov_live.c, docs/reliability.md):
 * OVERLAY.state takes a change of state only at a flush, after the data's fdatasync;
 * OVERLAY.live holds the states now, tagged with the kernel's boot id. A server killed in
 * this boot is reopened with OVERLAY.live (every acknowledged write there); a host crash
 * (another boot id, boot_id_set_for_test) drops it, and the blocks first written since the
 * last flush read as they did at that flush (clean: the base), never as zeros. Also: a
 * crash during a flush, snapshots in between, zeroing a clean block, version 1 state files,
 * overlay apply, and flushes at once.
 */
#include "../helpers.h"

#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "../../../blkd/overlay/overlay.h"
#include "../../../blkd/overlay/overlay_int.h"
#include "../../../common/boot_id.h"
#include "../../../common/crc32c.h"
#include "../../../common/fsutil.h"

#define BLK DISK_BLOCK
#define BLOCKS 200u

static const uint8_t boot_a[BOOT_ID_LEN] = { 0xa1, 0xa2, 0xa3, 0xa4, 5, 6, 7, 8,
					     9, 10, 11, 12, 13, 14, 15, 16 };
static const uint8_t boot_b[BOOT_ID_LEN] = { 0xb1, 0xb2, 0xb3, 0xb4, 5, 6, 7, 8,
					     9, 10, 11, 12, 13, 14, 15, 16 };

struct fx {
	char dir[PATH_MAX];
	char ov[PATH_MAX];      /* DIR/ov */
	char state[PATH_MAX];   /* DIR/ov.state */
	char live[PATH_MAX];    /* DIR/ov.live */
	char saved[PATH_MAX];   /* DIR/saved: OVERLAY as of the last flush */
	char disk_data[PATH_MAX], disk_state[PATH_MAX]; /* DIR/disk.*: what the disk holds */
	char mnt[PATH_MAX];     /* a tmpfs mounted there (fx_on_tmpfs), or "" */
	uint8_t digest[SHA256_LEN];
};

static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));

	assert_non_null(f);
	tmpdir_make(f->dir);
	path_fmt(f->ov, "%s/ov", f->dir);
	path_fmt(f->state, "%s/ov.state", f->dir);
	path_fmt(f->live, "%s/ov.live", f->dir);
	path_fmt(f->saved, "%s/saved", f->dir);
	path_fmt(f->disk_data, "%s/disk.data", f->dir);
	path_fmt(f->disk_state, "%s/disk.state", f->dir);
	assert_int_equal(sha256_buf("layout A", 8, f->digest), 0);
	boot_id_set_for_test(boot_a);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	boot_id_set_for_test(NULL);
	ov_set_sync_hook(NULL);
	if (f->mnt[0])
		umount2(f->mnt, MNT_DETACH);
	rm_rf(f->dir);
	free(f);
	return 0;
}

static struct overlay *ov_open(struct fx *f, bool create)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";
	int ret = overlay_open(f->ov, BLOCKS * BLK, f->digest, create, &ov, why, sizeof(why));

	if (ret)
		fail_msg("overlay_open: %d %s", ret, why[0] ? why : "");
	return ov;
}

static struct overlay *ov_open_ro(struct fx *f)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";
	int ret = overlay_open_existing(f->ov, true, &ov, why, sizeof(why));

	if (ret)
		fail_msg("overlay_open_existing: %d %s", ret, why[0] ? why : "");
	return ov;
}

static void write_stamp(struct overlay *ov, uint64_t block, uint64_t v)
{
	uint64_t b[BLK / 8];

	for (size_t i = 0; i < BLK / 8; i++)
		b[i] = v;
	assert_int_equal(overlay_write(ov, block, 1, b), 0);
}

/* The value a block was filled with; ~0 when its words disagree. */
static uint64_t read_stamp(struct overlay *ov, uint64_t block)
{
	uint64_t b[BLK / 8];

	assert_int_equal(overlay_read(ov, block, 1, b), 0);
	for (size_t i = 1; i < BLK / 8; i++)
		if (b[i] != b[0])
			return ~0ULL;
	return b[0];
}

/* from copied to to, holes kept (the overlays of some tests are sparse files of GiBs). */
static void copy_file(const char *from, const char *to)
{
	static uint8_t buf[1 << 20];
	int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	off_t size, at = 0, hole;

	assert_true(in >= 0 && out >= 0);
	size = lseek(in, 0, SEEK_END);
	assert_true(size >= 0);
	assert_int_equal(ftruncate(out, size), 0);
	while (at < size && (at = lseek(in, at, SEEK_DATA)) >= 0) {
		hole = lseek(in, at, SEEK_HOLE);
		assert_true(hole > at);
		while (at < hole) {
			size_t n = (size_t)(hole - at) < sizeof(buf) ? (size_t)(hole - at) : sizeof(buf);

			assert_int_equal(pread(in, buf, n, at), (ssize_t)n);
			assert_int_equal(pwrite(out, buf, n, at), (ssize_t)n);
			at += (off_t)n;
		}
	}
	close(in);
	close(out);
}

/* Block b's state as the file at path (a state or live file) records it; 3 if unreadable. */
static enum ov_state file_state(const char *path, uint64_t b)
{
	uint64_t w;
	int fd = open(path, O_RDONLY);
	ssize_t n = fd >= 0 ? pread(fd, &w, 8, (off_t)(OV_STATE_HDR + b / 32 * 8)) : -1;

	if (fd >= 0)
		close(fd);
	return n == 8 ? (enum ov_state)((w >> (2 * (b % 32))) & 3) : (enum ov_state)3;
}

/*
 * A host crash, by the overlay's sync hook: after each successful sync of OVERLAY or
 * OVERLAY.state the file is copied to DIR/disk.data or DIR/disk.state, what the disk then
 * holds; disk_crash() puts the copies back (every page written since a file's last sync
 * lost: the worst a power cut can do) and makes the next open one of another boot.
 */
static struct fx *disk_fx;

static int disk_hook(struct overlay *ov, enum ov_file which, int ret)
{
	(void)ov;
	if (!ret)
		copy_file(which == OV_DATA ? disk_fx->ov : disk_fx->state,
			  which == OV_DATA ? disk_fx->disk_data : disk_fx->disk_state);
	return ret;
}

/* The disk holds the overlay's files as they are now (synced); the hook follows them. */
static void disk_start(struct fx *f)
{
	copy_file(f->ov, f->disk_data);
	copy_file(f->state, f->disk_state);
	disk_fx = f;
	ov_set_sync_hook(disk_hook);
}

static void disk_crash(struct fx *f)
{
	copy_file(f->disk_data, f->ov);
	copy_file(f->disk_state, f->state);
	boot_id_set_for_test(boot_b);
}

/*
 * The server's life before a crash, in a child killed with SIGKILL (no flush, no close):
 * blocks 0..9 written (stamps 100 + b) and flushed, then 20 zeroed and flushed; then,
 * not flushed: first writes of 10..19 (stamps 200 + b), a rewrite of 0 (300), a zero of 5
 * (dirty before), a zero of 30 (clean before), a write of 20 (zeroed before: 400).
 * OVERLAY as of the flush is saved at f->saved.
 */
static void serve_and_die(struct fx *f)
{
	int status;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		struct overlay *ov = ov_open(f, true);

		for (uint64_t b = 0; b < 10; b++)
			write_stamp(ov, b, 100 + b);
		if (overlay_zero(ov, 20, 1) || overlay_flush(ov))
			_exit(3);
		copy_file(f->ov, f->saved);
		for (uint64_t b = 10; b < 20; b++)
			write_stamp(ov, b, 200 + b);
		write_stamp(ov, 0, 300);
		write_stamp(ov, 20, 400);
		if (overlay_zero(ov, 5, 1) || overlay_zero(ov, 30, 1))
			_exit(4);
		raise(SIGKILL);
		_exit(5);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

/* The disk as the dead server left it: every write there. */
static void check_all_there(struct overlay *ov)
{
	struct overlay_stats st;

	for (uint64_t b = 1; b < 10; b++)
		if (b != 5)
			assert_int_equal(read_stamp(ov, b), 100 + b);
	assert_int_equal(read_stamp(ov, 0), 300);
	for (uint64_t b = 10; b < 20; b++) {
		assert_int_equal(overlay_state(ov, b), OV_DIRTY);
		assert_int_equal(read_stamp(ov, b), 200 + b);
	}
	assert_int_equal(overlay_state(ov, 5), OV_ZERO);
	assert_int_equal(overlay_state(ov, 30), OV_ZERO);
	assert_int_equal(overlay_state(ov, 20), OV_DIRTY);
	assert_int_equal(read_stamp(ov, 20), 400);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.dirty_blocks, 20);
	assert_int_equal(st.zero_blocks, 2);
}

/* The disk as of the last flush: blocks first written since read clean (the base). */
static void check_as_flushed(struct overlay *ov)
{
	struct overlay_stats st;

	for (uint64_t b = 0; b < 10; b++) {
		assert_int_equal(overlay_state(ov, b), OV_DIRTY);
		if (b != 0)  /* block 0's rewrite: its page may be there or not */
			assert_int_equal(read_stamp(ov, b), 100 + b);
	}
	for (uint64_t b = 10; b < 20; b++)
		assert_int_equal(overlay_state(ov, b), OV_CLEAN);
	assert_int_equal(overlay_state(ov, 20), OV_ZERO);
	assert_int_equal(overlay_state(ov, 30), OV_CLEAN);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.dirty_blocks, 10);
	assert_int_equal(st.zero_blocks, 1);
}

/* Between flushes OVERLAY.state keeps the flushed states; OVERLAY.live has the new ones. */
static void test_state_waits_for_flush(void **state)
{
	struct fx *f = *state;

	serve_and_die(f);
	for (uint64_t b = 10; b < 20; b++) {
		assert_int_equal(file_state(f->state, b), OV_CLEAN);
		assert_int_equal(file_state(f->live, b), OV_DIRTY);
	}
	assert_int_equal(file_state(f->state, 5), OV_DIRTY);
	assert_int_equal(file_state(f->live, 5), OV_ZERO);
	assert_int_equal(file_state(f->state, 30), OV_CLEAN);
	assert_int_equal(file_state(f->state, 20), OV_ZERO);
}

/* Killed and reopened in the same boot: every acknowledged write is there. */
static void test_same_boot_applies(void **state)
{
	struct fx *f = *state;
	struct overlay *ov;

	serve_and_die(f);
	ov = ov_open_ro(f); /* lazyblk snapshot, overlay show, commit */
	check_all_there(ov);
	overlay_close(ov);
	ov = ov_open(f, false);
	check_all_there(ov);
	/* and its first flush puts them into OVERLAY.state */
	assert_int_equal(file_state(f->state, 15), OV_CLEAN);
	assert_int_equal(overlay_flush(ov), 0);
	assert_int_equal(file_state(f->state, 15), OV_DIRTY);
	assert_int_equal(file_state(f->state, 5), OV_ZERO);
	overlay_close(ov);
	boot_id_set_for_test(boot_b); /* nothing unflushed is left to lose */
	ov = ov_open(f, false);
	check_all_there(ov);
	overlay_close(ov);
}

/*
 * A host crash: the kernel had written none of the data since the flush (OVERLAY as
 * saved) but every page of the state files; reopened in another boot, the changes since
 * the flush are dropped, and no block reads as zeros that was not zeroed by then.
 */
static void test_other_boot_drops(void **state)
{
	struct fx *f = *state;
	struct overlay *ov;

	serve_and_die(f);
	copy_file(f->saved, f->ov);
	boot_id_set_for_test(boot_b);
	ov = ov_open_ro(f);
	check_as_flushed(ov);
	overlay_close(ov);
	ov = ov_open(f, false);
	check_as_flushed(ov);
	/* the server goes on from there; killed in boot b, it keeps what it wrote in b */
	write_stamp(ov, 15, 515);
	overlay_close(ov);
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 15), 515);
	assert_int_equal(overlay_state(ov, 14), OV_CLEAN);
	overlay_close(ov);
	/* and boot a's live file is gone: back in a boot named a, nothing comes back */
	boot_id_set_for_test(boot_a);
	ov = ov_open_ro(f);
	check_as_flushed(ov);
	overlay_close(ov);
}

/*
 * A crash during a flush: the data synced, the state file written in part. Every state it
 * holds is one of the flush's or older, and each is of data that is durable.
 */
static void test_crash_in_flush(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	char before[PATH_MAX];
	uint8_t *a, *b;
	size_t la, lb;

	/* blocks 0..31 fill word 0 of the bitmap, 32..63 word 1 */
	for (uint64_t i = 0; i < 64; i++)
		write_stamp(ov, i, 1000 + i);
	assert_int_equal(overlay_flush(ov), 0);
	path_fmt(before, "%s/state.before", f->dir);
	copy_file(f->state, before);
	write_stamp(ov, 100, 1100);  /* word 3 */
	write_stamp(ov, 160, 1160);  /* word 5 */
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	/* the flush's write of word 5 lost, word 3's kept */
	assert_int_equal(fs_read_file(before, &a, &la), 0);
	assert_int_equal(fs_read_file(f->state, &b, &lb), 0);
	assert_int_equal(la, lb);
	memcpy(b + OV_STATE_HDR + 5 * 8, a + OV_STATE_HDR + 5 * 8, 8);
	write_file(f->state, b, lb);
	free(a);
	free(b);
	boot_id_set_for_test(boot_b);
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 100), 1100);
	assert_int_equal(overlay_state(ov, 160), OV_CLEAN);
	for (uint64_t i = 0; i < 64; i++)
		assert_int_equal(read_stamp(ov, i), 1000 + i);
	overlay_close(ov);
}

/* A snapshot taken between flushes holds the unflushed writes (the states now). */
static void test_snapshot_between_flushes(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true), *ro;
	char delta[PATH_MAX], copy[PATH_MAX];
	char why[WHY_MAX] = "";

	write_stamp(ov, 1, 11);
	assert_int_equal(overlay_flush(ov), 0);
	write_stamp(ov, 2, 22);
	assert_int_equal(overlay_zero(ov, 3, 1), 0);
	path_fmt(delta, "%s/delta", f->dir);
	assert_int_equal(overlay_snapshot(ov, delta, why, sizeof(why)), 0);
	overlay_close(ov);
	path_fmt(copy, "%s/copy", f->dir);
	assert_int_equal(overlay_apply_delta(delta, copy, f->digest, BLOCKS * BLK, why, sizeof(why)), 0);
	assert_int_equal(overlay_open_existing(copy, true, &ro, why, sizeof(why)), 0);
	assert_int_equal(read_stamp(ro, 1), 11);
	assert_int_equal(read_stamp(ro, 2), 22);
	assert_int_equal(overlay_state(ro, 3), OV_ZERO);
	overlay_close(ro);
}

/* Overlay apply removes the old live file: its states are not the new overlay's. Removal. */
static void test_apply_drops_live(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	char delta[PATH_MAX];
	char why[WHY_MAX] = "";

	path_fmt(delta, "%s/delta", f->dir);
	assert_int_equal(overlay_snapshot(ov, delta, why, sizeof(why)), 0);  /* empty */
	write_stamp(ov, 7, 77);  /* not flushed: in OVERLAY.live only */
	overlay_close(ov);
	assert_true(path_exists(f->live));
	assert_int_equal(overlay_apply_delta(delta, f->ov, f->digest, BLOCKS * BLK, why, sizeof(why)), 0);
	assert_false(path_exists(f->live));
	ov = ov_open(f, false);
	assert_int_equal(overlay_state(ov, 7), OV_CLEAN);
	overlay_close(ov);
	/* and overlay_remove takes all three files */
	assert_true(path_exists(f->live) && path_exists(f->state) && path_exists(f->ov));
	overlay_remove(f->ov);
	assert_false(path_exists(f->live) || path_exists(f->state) || path_exists(f->ov));
}

/*
 * The overlay's files moved to a tmpfs mounted (with opts) at DIR/full, in a mount
 * namespace of this process's own; false if it may not mount one (not root).
 */
static bool fx_on_tmpfs(struct fx *f, const char *opts)
{
	char dir[PATH_MAX];

	path_fmt(dir, "%s/full", f->dir);
	assert_int_equal(mkdir(dir, 0700), 0);
	if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
	    mount("lazyblk-test", dir, "tmpfs", 0, opts) < 0)
		return false;
	memcpy(f->mnt, dir, sizeof(dir));
	path_fmt(f->ov, "%s/ov", dir);
	path_fmt(f->state, "%s/ov.state", dir);
	path_fmt(f->live, "%s/ov.live", dir);
	return true;
}

/* Writes to a new file at path until the filesystem is full. */
static void fill_up(const char *path)
{
	static const uint8_t z[BLK];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	while (write(fd, z, sizeof(z)) == (ssize_t)sizeof(z))
		;
	assert_int_equal(errno, ENOSPC);
	close(fd);
}

/* The state file's header made that of version 1 (instance 0), OVERLAY.live removed. */
static void make_v1(struct fx *f)
{
	struct ov_state_header h;
	int fd = open(f->state, O_RDWR);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	h.version = 1;
	h.instance = 0;
	h.header_crc = 0;
	h.header_crc = crc32c(~0u, &h, sizeof(h));
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	close(fd);
	unlink(f->live);
}

static uint32_t state_version(struct fx *f)
{
	struct ov_state_header h;
	int fd = open(f->state, O_RDONLY);

	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	close(fd);
	return h.version;
}

/*
 * A version 1 overlay that a server of 7515cfa left in this boot: a first write's data and
 * its state (dirty, written at once) in the page cache only. The writer that makes the file
 * version 2 syncs its header: the data must be durable before, or a host crash afterwards
 * leaves the block dirty without its data (zeros).
 */
static void test_version1_data_first(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	uint64_t b[BLK / 8], w;
	int fd;

	write_stamp(ov, 4, 44);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	make_v1(f);
	disk_start(f);
	/* the old server: block 7 written, then its state at once, then killed */
	for (size_t i = 0; i < BLK / 8; i++)
		b[i] = 77;
	fd = open(f->ov, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, b, BLK, 7 * BLK), BLK);
	close(fd);
	w = (1ULL << (2 * 4)) | (1ULL << (2 * 7));
	fd = open(f->state, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &w, 8, OV_STATE_HDR), 8);
	close(fd);
	ov = ov_open(f, false);
	assert_int_equal(state_version(f), 2);
	assert_int_equal(read_stamp(ov, 7), 77);
	overlay_close(ov);
	disk_crash(f);
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 4), 44);
	if (overlay_state(ov, 7) != OV_CLEAN) /* either the base or the write, never zeros */
		assert_int_equal(read_stamp(ov, 7), 77);
	overlay_close(ov);
}

/*
 * A full filesystem: a writer restarted in another boot rebuilds OVERLAY.live over the
 * room it holds; without one (and no room), it is refused with the room it needs, before
 * it touched the state file (a version 1 header stays as it was), and opens once there is
 * room.
 */
static void test_live_no_room(void **state)
{
	struct fx *f = *state;
	const uint64_t blocks = 16384; /* a 64 MiB disk: a 4 KiB bitmap */
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";
	char filler[PATH_MAX];
	uint64_t b[BLK / 8] = { 0 }, n;

	if (!fx_on_tmpfs(f, "size=512k"))
		skip();
	path_fmt(filler, "%s/filler", f->mnt);
	assert_int_equal(overlay_open(f->ov, blocks * BLK, f->digest, true, &ov, why, sizeof(why)), 0);
	for (n = 0; n < blocks; n++) { /* every other block, until there is no room */
		b[0] = n;
		if (overlay_write(ov, 2 * n, 1, b))
			break;
	}
	assert_true(n > 10 && n < blocks);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	boot_id_set_for_test(boot_b);
	assert_int_equal(overlay_open(f->ov, blocks * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	assert_int_equal(overlay_state(ov, 2 * (n - 1)), OV_DIRTY);
	overlay_close(ov);
	make_v1(f);
	fill_up(filler);
	boot_id_set_for_test(boot_a);
	why[0] = '\0';
	assert_int_equal(overlay_open(f->ov, blocks * BLK, f->digest, false, &ov, why, sizeof(why)), -ENOSPC);
	assert_true(why[0]);
	assert_string_equal(why, "no room for ov.live (8192 bytes)");
	assert_int_equal(state_version(f), 1);
	assert_int_equal(unlink(filler), 0);
	assert_int_equal(overlay_open(f->ov, blocks * BLK, f->digest, false, &ov, why, sizeof(why)), 0);
	assert_int_equal(state_version(f), 2);
	assert_int_equal(overlay_state(ov, 2 * (n - 1)), OV_DIRTY);
	overlay_close(ov);
}

/* A version 1 state file (before OVERLAY.live) opens; a writer makes it version 2. */
static void test_version1(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	struct ov_state_header h;
	int fd;

	write_stamp(ov, 4, 44);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	unlink(f->live);
	fd = open(f->state, O_RDWR);
	assert_true(fd >= 0);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	assert_int_equal(h.version, 2);
	assert_true(h.instance != 0);
	h.version = 1;
	h.instance = 0;
	h.header_crc = 0;
	h.header_crc = crc32c(~0u, &h, sizeof(h));
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	ov = ov_open_ro(f);
	assert_int_equal(read_stamp(ov, 4), 44);
	overlay_close(ov);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	assert_int_equal(h.version, 1);
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 4), 44);
	write_stamp(ov, 5, 55);
	overlay_close(ov);
	assert_int_equal(pread(fd, &h, sizeof(h), 0), sizeof(h));
	assert_int_equal(h.version, 2);
	assert_true(h.instance != 0);
	close(fd);
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 5), 55);
	overlay_close(ov);
	/* a version 1 file with an instance is not one lazyblk wrote */
	fd = open(f->state, O_RDWR);
	assert_true(fd >= 0);
	h.version = 1;
	h.header_crc = 0;
	h.header_crc = crc32c(~0u, &h, sizeof(h));
	assert_int_equal(pwrite(fd, &h, sizeof(h), 0), sizeof(h));
	close(fd);
	{
		char why[WHY_MAX] = "";

		ov = NULL;
		assert_int_equal(overlay_open_existing(f->ov, true, &ov, why, sizeof(why)), -EBADMSG);
		assert_non_null(strstr(why, "instance"));
	}
}

/* A live file of this boot and this overlay that is damaged is refused, not ignored. */
static void test_live_damaged(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	char why[WHY_MAX] = "";
	uint8_t x = 0xff;
	int fd;

	write_stamp(ov, 1, 1);
	overlay_close(ov);
	fd = open(f->live, O_WRONLY);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, &x, 1, OV_STATE_HDR + 1), 1);  /* state 3 */
	close(fd);
	ov = NULL;
	assert_int_equal(overlay_open(f->ov, BLOCKS * BLK, f->digest, false, &ov, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "live state file"));
	/* in another boot the file is not believed at all: the overlay opens */
	boot_id_set_for_test(boot_b);
	ov = ov_open(f, false);
	assert_int_equal(overlay_state(ov, 1), OV_CLEAN);
	overlay_close(ov);
	/* a symbolic link there is refused */
	assert_int_equal(unlink(f->live), 0);
	assert_int_equal(symlink("elsewhere", f->live), 0);
	assert_int_equal(overlay_open(f->ov, BLOCKS * BLK, f->digest, false, &ov, why, sizeof(why)), -EBADMSG);
	assert_non_null(strstr(why, "symbolic link"));
}

/*
 * A server killed inside a flush, after it synced the data and wrote its words into
 * OVERLAY.state's page cache, before it synced that file; the next server (same boot)
 * believes OVERLAY.live, whose words then equal the unsynced ones it reads from
 * OVERLAY.state. A FLUSH it completes must make them durable: after a host crash the
 * flushed write is there (it read as the base when the second server skipped the sync).
 */
static void test_same_boot_partial_flush(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	int status;
	pid_t pid;

	overlay_close(ov);
	disk_start(f);
	ov_set_sync_hook(NULL); /* the dead server's syncs are done by hand below */
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t w = 1; /* block 0 dirty */
		int fd;

		ov = ov_open(f, false);
		write_stamp(ov, 0, 0xab);
		fd = open(f->ov, O_RDWR);  /* the flush: the data synced, ... */
		if (fd < 0 || fdatasync(fd) < 0)
			_exit(3);
		fd = open(f->state, O_RDWR); /* ... its word put, and killed before the sync */
		if (fd < 0 || pwrite(fd, &w, 8, OV_STATE_HDR) != 8)
			_exit(4);
		raise(SIGKILL);
		_exit(5);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	copy_file(f->ov, f->disk_data); /* what the dead server's data sync made durable */
	ov_set_sync_hook(disk_hook);
	ov = ov_open(f, false);
	assert_int_equal(overlay_state(ov, 0), OV_DIRTY);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	disk_crash(f);
	ov = ov_open(f, false);
	assert_int_equal(overlay_state(ov, 0), OV_DIRTY);
	assert_int_equal(read_stamp(ov, 0), 0xab);
	overlay_close(ov);
}

/*
 * Flushes at once: 8 threads write blocks of their own and flush every few writes; after
 * each flush returns, every block the thread wrote before asking is dirty in OVERLAY.state
 * itself (a flush returns after those before it, which may have taken its states).
 */
#define FL_THREADS 8
#define FL_WRITES 400

struct fl_arg {
	struct overlay *ov;
	const char *state;
	unsigned id;
	int bad;
};

static void *fl_main(void *p)
{
	struct fl_arg *a = p;
	uint64_t rng = a->id + 1, mine[FL_WRITES], buf[BLK / 8] = { 0 };
	size_t n = 0;

	for (unsigned i = 0; i < FL_WRITES; i++) {
		uint64_t b;

		rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
		b = (rng >> 33) % (BLOCKS / FL_THREADS) * FL_THREADS + a->id;
		buf[0] = b;
		if (overlay_write(a->ov, b, 1, buf)) /* no cmocka asserts on this thread */
			a->bad++;
		mine[n++] = b;
		if (rng % 5)
			continue;
		if (overlay_flush(a->ov)) {
			a->bad++;
			continue;
		}
		for (size_t k = 0; k < n; k++)
			if (file_state(a->state, mine[k]) != OV_DIRTY)
				a->bad++;
	}
	return NULL;
}

static void test_flushes_at_once(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	struct fl_arg a[FL_THREADS];
	pthread_t th[FL_THREADS];

	for (unsigned i = 0; i < FL_THREADS; i++) {
		a[i] = (struct fl_arg){ .ov = ov, .state = f->state, .id = i };
		assert_int_equal(pthread_create(&th[i], NULL, fl_main, &a[i]), 0);
	}
	for (unsigned i = 0; i < FL_THREADS; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		assert_int_equal(a[i].bad, 0);
	}
	/* and OVERLAY.state holds nothing the overlay does not */
	for (uint64_t b = 0; b < BLOCKS; b++)
		if (file_state(f->state, b) == OV_DIRTY)
			assert_int_equal(overlay_state(ov, b), OV_DIRTY);
	overlay_close(ov);
}

/* overlay_open of a disk of blocks blocks (not BLOCKS) */
static struct overlay *ov_open_n(struct fx *f, uint64_t blocks, bool create)
{
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";
	int ret = overlay_open(f->ov, blocks * BLK, f->digest, create, &ov, why, sizeof(why));

	if (ret)
		fail_msg("overlay_open: %d %s", ret, why[0] ? why : "");
	return ov;
}

/* The sync hook of a test: its failures to inject, the syncs it saw. */
static struct {
	int fail_data, fail_state;   /* the next so many syncs of each fail with -EIO */
	unsigned data, state;        /* syncs seen */
} inj;

static int inj_hook(struct overlay *ov, enum ov_file which, int ret)
{
	int *fail = which == OV_DATA ? &inj.fail_data : &inj.fail_state;

	(void)ov;
	__atomic_fetch_add(which == OV_DATA ? &inj.data : &inj.state, 1, __ATOMIC_RELAXED);
	if (*fail > 0) {
		(*fail)--;
		return -EIO;
	}
	return ret;
}

/*
 * A failed sync of the data is for good: the kernel marks the pages it could not write
 * clean and reports the error once, so a later fdatasync returns 0 for data that is not
 * on the disk. Every later flush fails and puts no state into OVERLAY.state, until the
 * overlay is opened again.
 */
static void test_data_sync_fails_for_good(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);

	memset(&inj, 0, sizeof(inj));
	ov_set_sync_hook(inj_hook);
	write_stamp(ov, 1, 11);
	assert_int_equal(overlay_flush(ov), 0);
	write_stamp(ov, 2, 22);  /* a first write: its data lost by the failed sync */
	inj.fail_data = 1;
	assert_int_equal(overlay_flush(ov), -EIO);
	write_stamp(ov, 3, 33);
	assert_int_equal(overlay_flush(ov), -EIO);  /* the next sync would return 0 */
	assert_int_equal(overlay_flush(ov), -EIO);
	assert_int_equal(file_state(f->state, 1), OV_DIRTY);
	assert_int_equal(file_state(f->state, 2), OV_CLEAN);
	assert_int_equal(file_state(f->state, 3), OV_CLEAN);
	overlay_close(ov);
	/* opened again (what the guest wrote there, in this boot): flushes work again */
	ov = ov_open(f, false);
	assert_int_equal(read_stamp(ov, 2), 22);
	assert_int_equal(overlay_flush(ov), 0);
	assert_int_equal(file_state(f->state, 2), OV_DIRTY);
	assert_int_equal(file_state(f->state, 3), OV_DIRTY);
	overlay_close(ov);
}

/*
 * Two flushes at once, A's data sync and B's: the kernel reports a write-back error to
 * one sync of the file only, here B's, after A's returned 0 (the error may be of A's
 * pages). A must not put its words into OVERLAY.state: it waits for B's sync and fails.
 */
static struct {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool a_syncing, b_syncing, a_returned;
} race = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false, false };
static __thread bool race_is_a;

static int race_hook(struct overlay *ov, enum ov_file which, int ret)
{
	(void)ov;
	if (which != OV_DATA)
		return ret;
	pthread_mutex_lock(&race.m);
	if (race_is_a) {
		race.a_syncing = true;
		pthread_cond_broadcast(&race.c);
		while (!race.b_syncing)
			pthread_cond_wait(&race.c, &race.m);
		race.a_returned = true;
	} else {
		race.b_syncing = true;
		pthread_cond_broadcast(&race.c);
		while (!race.a_returned)
			pthread_cond_wait(&race.c, &race.m);
		ret = -EIO;
	}
	pthread_cond_broadcast(&race.c);
	pthread_mutex_unlock(&race.m);
	return ret;
}

struct race_arg {
	struct overlay *ov;
	int ret;
};

static void *race_a(void *p)
{
	struct race_arg *a = p;

	race_is_a = true;
	a->ret = overlay_flush(a->ov);
	return NULL;
}

static void test_data_sync_error_told_to_another(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	struct race_arg a = { .ov = ov };
	pthread_t th;

	ov_set_sync_hook(race_hook);
	write_stamp(ov, 5, 55);
	assert_int_equal(pthread_create(&th, NULL, race_a, &a), 0);
	pthread_mutex_lock(&race.m);
	while (!race.a_syncing)  /* A took block 5's word and syncs */
		pthread_cond_wait(&race.c, &race.m);
	pthread_mutex_unlock(&race.m);
	write_stamp(ov, 40, 4040);
	assert_int_equal(overlay_flush(ov), -EIO);  /* B */
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.ret, -EIO);
	assert_int_equal(file_state(f->state, 5), OV_CLEAN);
	assert_int_equal(file_state(f->state, 40), OV_CLEAN);
	overlay_close(ov);
}

/*
 * A flush that failed in OVERLAY.state's sync puts its words back (touched); the next
 * flush writes them again and makes them durable. And one that took its words while an
 * earlier one was under way, which then failed: it flushes again (the earlier one's words
 * may hold its writes' states), and returns only once they are durable.
 */
static struct {
	pthread_mutex_t m;
	pthread_cond_t c;
	bool first_at_state, second_took;
} ag = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };
static __thread bool ag_is_first;

static int again_hook(struct overlay *ov, enum ov_file which, int ret)
{
	(void)ov;
	pthread_mutex_lock(&ag.m);
	if (ag_is_first && which == OV_STATE) {
		ag.first_at_state = true;
		pthread_cond_broadcast(&ag.c);
		while (!ag.second_took)
			pthread_cond_wait(&ag.c, &ag.m);
		ret = -EIO;
	} else if (!ag_is_first && which == OV_DATA) {
		ag.second_took = true;
		pthread_cond_broadcast(&ag.c);
	}
	pthread_mutex_unlock(&ag.m);
	return ret;
}

static void *again_first(void *p)
{
	struct race_arg *a = p;

	ag_is_first = true;
	a->ret = overlay_flush(a->ov);
	return NULL;
}

static void test_state_sync_fails(void **state)
{
	struct fx *f = *state;
	struct overlay *ov = ov_open(f, true);
	struct race_arg a = { .ov = ov };
	pthread_t th;

	memset(&inj, 0, sizeof(inj));
	ov_set_sync_hook(inj_hook);
	write_stamp(ov, 1, 11);
	inj.fail_state = 1;
	assert_int_equal(overlay_flush(ov), -EIO);
	assert_int_equal(overlay_flush(ov), 0);
	assert_int_equal(inj.state, 2);  /* the word taken again, written again, synced */
	assert_int_equal(file_state(f->state, 1), OV_DIRTY);
	/* the first flush fails after the second took its words: the second flushes again */
	ov_set_sync_hook(again_hook);
	write_stamp(ov, 2, 22);          /* word 0 */
	assert_int_equal(pthread_create(&th, NULL, again_first, &a), 0);
	pthread_mutex_lock(&ag.m);
	while (!ag.first_at_state)
		pthread_cond_wait(&ag.c, &ag.m);
	pthread_mutex_unlock(&ag.m);
	write_stamp(ov, 100, 1100);      /* word 3: the second flush's own */
	assert_int_equal(overlay_flush(ov), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(a.ret, -EIO);
	assert_int_equal(file_state(f->state, 2), OV_DIRTY);
	assert_int_equal(file_state(f->state, 100), OV_DIRTY);
	overlay_close(ov);
}

/*
 * Words written into OVERLAY.state a run at a time: words less than a page apart in one
 * pwrite, with the words between them as the file has them (flushed before, or clean);
 * farther ones apart. A bitmap of 128 KiB (4 Mi blocks), words all over it.
 */
static void test_flush_runs(void **state)
{
	struct fx *f = *state;
	const uint64_t blocks = 4u << 20;
	static const size_t first[] = { 5, 400, 9000 }, then[] = { 0, 200, 1000, 1511, 16383 };
	struct overlay *ov = ov_open_n(f, blocks, true);

	for (size_t i = 0; i < sizeof(first) / sizeof(first[0]); i++)
		write_stamp(ov, first[i] * 32 + 7, first[i]);
	assert_int_equal(overlay_flush(ov), 0);
	disk_start(f);
	for (size_t i = 0; i < sizeof(then) / sizeof(then[0]); i++)
		write_stamp(ov, then[i] * 32 + 3, then[i]);
	assert_int_equal(overlay_zero(ov, 600 * 32, 32), 0);   /* a whole word, zeroed */
	write_stamp(ov, 601 * 32, 601);                         /* and the next one's first */
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	disk_crash(f);
	ov = ov_open_n(f, blocks, false);
	for (uint64_t w = 0; w < blocks / 32; w++) {
		bool one = w == 5 || w == 400 || w == 9000, two = false;

		for (size_t i = 0; i < sizeof(then) / sizeof(then[0]); i++)
			two |= w == then[i];
		for (uint64_t b = w * 32; b < w * 32 + 32; b++) {
			enum ov_state want = (one && b == w * 32 + 7) || (two && b == w * 32 + 3) ||
					     b == 601 * 32 ? OV_DIRTY : w == 600 ? OV_ZERO : OV_CLEAN;

			if (overlay_state(ov, b) != want)
				fail_msg("block %llu: state %d, want %d", (unsigned long long)b,
					 overlay_state(ov, b), want);
		}
	}
	assert_int_equal(read_stamp(ov, 9000 * 32 + 7), 9000);
	assert_int_equal(read_stamp(ov, 16383 * 32 + 3), 16383);
	overlay_close(ov);
}

/*
 * More words changed than a flush takes at once (65,536: a discard of the whole of a 12 GiB
 * disk): taken in turns, each made durable; after a host crash every block reads zeroed.
 */
static void test_flush_in_turns(void **state)
{
	struct fx *f = *state;
	const uint64_t blocks = 3u << 20;
	struct overlay *ov = ov_open_n(f, blocks, true);
	struct overlay_stats st;

	write_stamp(ov, blocks - 1, 1);
	assert_int_equal(overlay_flush(ov), 0);
	disk_start(f);
	assert_int_equal(overlay_zero(ov, 0, blocks - 1), 0);
	assert_int_equal(overlay_flush(ov), 0);
	overlay_close(ov);
	disk_crash(f);
	ov = ov_open_n(f, blocks, false);
	overlay_get_stats(ov, &st);
	assert_int_equal(st.zero_blocks, blocks - 1);
	assert_int_equal(st.dirty_blocks, 1);
	assert_int_equal(read_stamp(ov, blocks - 1), 1);
	overlay_close(ov);
}

/*
 * What a flush holds is bounded, whatever changed since the last one: after a discard of
 * a whole 128 GiB disk (a million words of states changed), a flush fits in 8 MiB more
 * address space than the overlay had (it took 16 bytes a word: 16 MiB). In a process of
 * its own (this program again, so that no memory freed before serves it), its address
 * space limited (not under ASan, whose shadow memory needs more). Its exit status: 0, or
 * the step that failed.
 */
static int flush_memory_child(const char *dir)
{
	const uint64_t blocks = 32u << 20;
	struct overlay *ov = NULL;
	char why[WHY_MAX] = "";
	uint8_t digest[SHA256_LEN];
	uint64_t b[BLK / 8] = { 0 };
	unsigned long long pages = 0;
	char path[PATH_MAX];
	struct rlimit rl;
	FILE *fp;

	if (snprintf(path, sizeof(path), "%s/big", dir) >= (int)sizeof(path) ||
	    sha256_buf("layout A", 8, digest))
		return 2;
	if (overlay_open(path, blocks * BLK, digest, true, &ov, why, sizeof(why)) ||
	    overlay_write(ov, 0, 1, b) || overlay_flush(ov) || overlay_zero(ov, 1, blocks - 1))
		return 3;
	fp = fopen("/proc/self/statm", "r");
	if (!fp || fscanf(fp, "%llu", &pages) != 1)
		return 4;
	fclose(fp);
	rl.rlim_cur = rl.rlim_max = pages * (uint64_t)sysconf(_SC_PAGESIZE) + (8u << 20);
	if (setrlimit(RLIMIT_AS, &rl))
		return 5;
	if (overlay_flush(ov))
		return 6;
	overlay_close(ov);
	return 0;
}

static void test_flush_memory_bounded(void **state)
{
	struct fx *f = *state;
	int status;
	pid_t pid;

#if defined(__SANITIZE_ADDRESS__)
	skip();
#endif
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		execl("/proc/self/exe", "test_overlay_crash", "--flush-memory", f->dir, (char *)NULL);
		_exit(127);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_state_waits_for_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_boot_applies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_boot_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crash_in_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_between_flushes, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_drops_live, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_version1_data_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_no_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_live_damaged, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flushes_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_same_boot_partial_flush, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_sync_fails_for_good, setup, teardown),
		cmocka_unit_test_setup_teardown(test_data_sync_error_told_to_another, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_state_sync_fails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_runs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_in_turns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_flush_memory_bounded, setup, teardown),
	};

	if (argc == 3 && !strcmp(argv[1], "--flush-memory"))
		return flush_memory_child(argv[2]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
