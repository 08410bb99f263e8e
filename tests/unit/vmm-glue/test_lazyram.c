/* SPDX-License-Identifier: MIT */
/*
 * The lazy RAM restore (vmm-glue/lazyram/lazyram.h) on plain memory, no KVM: a store with a
 * few chunks and a page map made by hand (zero pages, a chunk whose pages are in order, one
 * in reverse, one shared by two places of RAM); every page read from the test thread is the
 * map's; a write stays private (the cache file unchanged) and is what lazyram_written
 * reports; a second restore of the same snapshot ("a clone") gets every page through minor
 * faults without fetching; a corrupt chunk calls the fatal callback and its page is never
 * readable; a recorded trace names the pages first touched, in order, and its replay maps
 * them before the guest asks; a cache dir not on tmpfs is refused.
 *
 * A page that cannot be had leaves its faulting thread blocked for good (until the process
 * ends or lazyram_close fences it). So that test runs the restore in a child process that
 * touches the page: the parent waits for the fatal line (through a pipe), sees the child
 * still blocked and not done, and kills it. Without userfaultfd (ENOSYS, EPERM) the tests
 * skip.
 */
#include "../helpers.h"

#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "../../../cas/chunk.h"
#include "../../../cas/source.h"
#include "../../../cas/trace.h"
#include "../../../vmm-glue/lazyram/lazyram.h"

#define PG 4096u
#define NP 96u
#define NCH 4u

/* The map: page -> (chunk + 1, slot), 0: zero. */
struct fx {
	char dir[PATH_MAX], store[PATH_MAX], cache[PATH_MAX];
	struct store *s;
	struct cas_source *src;
	struct rammap m;
	struct rammap_chunk chunks[NCH + 1];
	struct rammap_page pages[NP];
	uint32_t user_off[NCH + 2], users[NP];
	uint8_t *exp;               /* NP pages: what the guest must read */
	uint8_t id[LAZYRAM_ID_LEN];
};

static void map_page(struct fx *f, uint32_t p, uint32_t chunk, uint32_t slot)
{
	f->pages[p] = (struct rammap_page){ .chunk = chunk, .slot = slot };
}

/* The user index rammap_index would build. */
static void map_index(struct fx *f)
{
	uint32_t n = 0;

	f->m.nonzero = 0;
	for (uint32_t c = 0; c < f->m.nchunks; c++) {
		f->user_off[c] = n;
		for (uint32_t p = 0; p < NP; p++)
			if (f->pages[p].chunk == c + 1)
				f->users[n++] = p;
	}
	f->user_off[f->m.nchunks] = n;
	f->m.nonzero = n;
}

/* A chunk of npages pages from seed into the store (its frame bad when corrupt). */
static void chunk_add(struct fx *f, uint32_t c, uint32_t npages, uint64_t seed, bool corrupt)
{
	size_t len = (size_t)npages * PG, cap = chunk_compress_bound(len), n;
	uint8_t *raw = malloc(len), *frame = malloc(cap);
	struct chunk_codec *codec = chunk_codec_new(3);

	assert_non_null(raw);
	assert_non_null(frame);
	content_make(raw, len, seed, true, f->chunks[c].digest);
	f->chunks[c].npages = npages;
	if (corrupt)
		raw[5] ^= 1; /* stored under the name of other bytes */
	assert_int_equal(chunk_compress(codec, raw, len, frame, cap, &n), 0);
	assert_int_equal(store_put(f->s, f->chunks[c].digest, frame, n), 0);
	assert_int_equal(store_commit(f->s), 0);
	if (corrupt)
		raw[5] ^= 1;
	for (uint32_t p = 0; p < NP; p++)
		if (f->pages[p].chunk == c + 1)
			memcpy(f->exp + (size_t)p * PG, raw + (size_t)f->pages[p].slot * PG, PG);
	chunk_codec_free(codec);
	free(raw);
	free(frame);
}

/*
 * pages 0-7 zero | 8-23 chunk 0 in order | 24-39 chunk 1 reversed | 40-47 chunk 2 | 48-63
 * zero | 64-79 chunk 3 | 80-87 chunk 2 again | 88-95 zero. corrupt: chunk 3's frame is bad.
 */
static int setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct cas_source_opts so = { 0 };
	uint64_t seed = (uint64_t)getpid() * 1000003u ^ (uint64_t)time(NULL);

	assert_non_null(f);
	f->exp = calloc(NP, PG);
	assert_non_null(f->exp);
	assert_int_equal(store_tmp_open(f->dir, f->store, &f->s), 0);
	path_fmt(f->cache, "%s/cache", f->dir);
	prng_fill(&seed, f->id, sizeof(f->id));
	for (uint32_t i = 0; i < 16; i++) {
		map_page(f, 8 + i, 1, i);
		map_page(f, 24 + i, 2, 15 - i);
		map_page(f, 64 + i, 4, i);
	}
	for (uint32_t i = 0; i < 8; i++) {
		map_page(f, 40 + i, 3, i);
		map_page(f, 80 + i, 3, i);
	}
	f->m = (struct rammap){ .mem_size = NP * PG, .npages = NP, .nchunks = NCH,
				.chunks = f->chunks, .pages = f->pages, .user_off = f->user_off,
				.users = f->users };
	map_index(f);
	chunk_add(f, 0, 16, 1, false);
	chunk_add(f, 1, 16, 2, false);
	chunk_add(f, 2, 8, 3, false);
	chunk_add(f, 3, 16, 4, false);
	so.store_dir = f->store;
	assert_int_equal(cas_source_open(&so, &f->src, NULL, 0), 0);
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fx *f = *state;

	cas_source_close(f->src);
	store_close(f->s);
	rm_rf(f->dir);
	free(f->exp);
	free(f);
	return 0;
}

static void fatal_fail(void *arg, const char *reason)
{
	(void)arg;
	fail_msg("unexpected fatal: %s", reason);
}

/* A restore: opened, mapped privately, started; NULL (test skipped) without userfaultfd. */
struct restore {
	struct lazyram *lr;
	uint8_t *ram;
	int fd;
};

static bool restore_start(struct fx *f, struct lazyram_opts *o, struct restore *r)
{
	char why[WHY_MAX] = "";
	int ret;

	o->map = &f->m;
	o->src = f->src;
	o->cache_dir = f->cache;
	memcpy(o->id, f->id, sizeof(f->id));
	if (!o->fatal)
		o->fatal = fatal_fail;
	ret = lazyram_open(o, &r->lr, &r->fd, why, sizeof(why));
	if (ret)
		fail_msg("lazyram_open: %s", why[0] ? why : strerror(-ret));
	r->ram = mmap(NULL, NP * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE, r->fd, 0);
	assert_true(r->ram != MAP_FAILED);
	ret = lazyram_start(r->lr, r->ram, NP * PG, why, sizeof(why));
	if (ret == -ENOSYS || ret == -EPERM) {
		print_message("skipped: %s\n", why);
		lazyram_close(r->lr);
		munmap(r->ram, NP * PG);
		return false;
	}
	if (ret)
		fail_msg("lazyram_start: %s", why[0] ? why : strerror(-ret));
	return true;
}

static void restore_end(struct restore *r)
{
	lazyram_close(r->lr);
	munmap(r->ram, NP * PG);
}

static void check_all(struct fx *f, const uint8_t *ram)
{
	for (uint32_t p = 0; p < NP; p++)
		if (memcmp(ram + (size_t)p * PG, f->exp + (size_t)p * PG, PG))
			fail_msg("page %u differs", p);
}

static bool cache_empty(const char *dir)
{
	char pat[PATH_MAX];

	path_fmt(pat, "%s/*", dir);
	return !path_glob_exists(pat);
}

static void test_read_write_clone(void **state)
{
	struct fx *f = *state;
	struct lazyram_opts o1 = { 0 }, o2 = { 0 };
	struct restore a, b;
	struct lazyram_stats st;
	uint64_t written[(NP + 63) / 64], n = 0;
	uint8_t page[PG];
	char why[WHY_MAX] = "";

	if (!restore_start(f, &o1, &a))
		skip();
	check_all(f, a.ram);
	lazyram_get_stats(a.lr, &st);
	assert_int_equal(st.chunks_fetched, NCH);
	assert_int_equal(st.pages_filled, 16 + 16 + 16 + 16); /* chunk 2's 8 slots, twice */
	assert_int_equal(st.failed, 0);
	assert_true(st.faults_zero >= 1);
	assert_true(st.first_fault_us > 0);
	/* a write stays in this process: the cache file keeps the snapshot's bytes */
	a.ram[10 * PG + 7] ^= 0xff;
	a.ram[2 * PG] = 1;
	assert_int_equal(pread(a.fd, page, PG, 10 * PG), PG);
	assert_memory_equal(page, f->exp + 10 * PG, PG);
	assert_int_equal(lazyram_written(a.lr, written, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 2);
	assert_true(written[0] & (1ull << 10));
	assert_true(written[0] & (1ull << 2));

	/* a clone: every page of the file through minor faults, nothing fetched */
	if (!restore_start(f, &o2, &b))
		skip();
	check_all(f, b.ram);
	lazyram_get_stats(b.lr, &st);
	assert_int_equal(st.chunks_fetched, 0);
	assert_int_equal(st.pages_filled, 0);
	assert_true(st.faults_minor > 0);
	assert_int_equal(lazyram_written(b.lr, written, &n, why, sizeof(why)), 0);
	assert_int_equal(n, 0);
	{
		char *buf = NULL;
		size_t len = 0;
		FILE *m = open_memstream(&buf, &len);

		assert_int_equal(lazyram_stats_json(b.lr, m), 0);
		fclose(m);
		assert_non_null(strstr(buf, "\"chunks_fetched\":0"));
		free(buf);
	}
	restore_end(&b);
	assert_false(cache_empty(f->cache)); /* a still uses it */
	restore_end(&a);
	assert_true(cache_empty(f->cache));
}

/* The child: a restore whose fatal line goes to the pipe, then a touch of page 70. */
static void fatal_pipe(void *arg, const char *reason)
{
	int fd = *(int *)arg;
	char line[WHY_MAX + 8];
	int n = snprintf(line, sizeof(line), "F %s\n", reason);

	if (write(fd, line, (size_t)n) < 0)
		_exit(3);
}

static void child_touch(struct fx *f, int wfd)
{
	struct lazyram_opts o = { .fatal = fatal_pipe, .fatal_arg = &wfd };
	struct restore r;
	volatile uint8_t x;

	if (!restore_start(f, &o, &r))
		_exit(77);
	x = r.ram[70 * PG]; /* chunk 3: corrupt, never mapped */
	(void)x;
	if (write(wfd, "DONE\n", 5) < 0)
		_exit(3);
	_exit(0);
}

static void test_corrupt(void **state)
{
	struct fx *f = *state;
	char buf[2 * WHY_MAX] = "";
	size_t got = 0;
	int pfd[2], status;
	pid_t pid;

	/* chunk 3 stored again, corrupt, under a new name the map now uses */
	memset(f->chunks[3].digest, 0, SHA256_LEN);
	chunk_add(f, 3, 16, 5, true);
	assert_int_equal(pipe(pfd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		child_touch(f, pfd[1]);
	}
	close(pfd[1]);
	/* wait for the fatal line (or the child's end) */
	while (!strchr(buf, '\n') && got < sizeof(buf) - 1) {
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };
		ssize_t n;

		assert_int_equal(poll(&p, 1, 120000), 1);
		n = read(pfd[0], buf + got, sizeof(buf) - 1 - got);
		assert_true(n >= 0);
		if (n == 0)
			break;
		got += (size_t)n;
		buf[got] = '\0';
	}
	if (waitpid(pid, &status, WNOHANG) == pid && WIFEXITED(status) &&
	    WEXITSTATUS(status) == 77) {
		close(pfd[0]);
		skip();
	}
	if (strncmp(buf, "F ", 2) || !strstr(buf, "RAM page 70") || !strstr(buf, "sha256:"))
		fail_msg("no fatal line for page 70: '%s'", buf);
	/* a pause that must show nothing: the child stays blocked on the page */
	{
		struct pollfd p = { .fd = pfd[0], .events = POLLIN };

		assert_int_equal(poll(&p, 1, 200), 0);
	}
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	assert_int_equal(read(pfd[0], buf, sizeof(buf)), 0); /* never "DONE" */
	close(pfd[0]);
}

static const uint32_t order[] = { 70, 9, 41, 3 };

static void test_trace_replay(void **state)
{
	struct fx *f = *state;
	struct lazyram_opts o = { .record = true }, p = { 0 };
	struct restore r;
	struct lazyram_stats st;
	struct trace *t;
	char path[PATH_MAX], why[WHY_MAX] = "";
	double t0;

	if (!restore_start(f, &o, &r))
		skip();
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		assert_memory_equal(r.ram + (size_t)order[i] * PG, f->exp + (size_t)order[i] * PG,
				    PG);
	path_fmt(path, "%s/ram.trace", f->dir);
	assert_int_equal(lazyram_trace_write(r.lr, path, why, sizeof(why)), 0);
	restore_end(&r);
	assert_true(cache_empty(f->cache));
	assert_int_equal(trace_load(path, &t, why, sizeof(why)), 0);
	assert_int_equal(t->hdr->version, TRACE_VERSION);
	assert_memory_equal(t->hdr->snapshot_id, f->id, LAZYRAM_ID_LEN);
	assert_int_equal(t->n_records, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_true(trace_record_is_ram(&t->records[i]));
		assert_int_equal(t->records[i].disk_off, (uint64_t)order[i] * PG);
		assert_int_equal(t->records[i].len, PG);
	}

	/* replayed on an empty cache: the chunks mapped before the guest asks */
	p.prefetch = t;
	if (!restore_start(f, &p, &r))
		skip();
	t0 = now_monotonic();
	do {
		lazyram_get_stats(r.lr, &st);
		if (now_monotonic() - t0 > 120)
			fail_msg("prefetch did not end");
		if (!st.prefetch_done)
			usleep(1000);
	} while (!st.prefetch_done);
	assert_int_equal(st.prefetch_chunks, 3);
	assert_int_equal(st.prefetch_pages, 16 + 16 + 8 + 8);
	{
		uint64_t pages, bytes;

		lazyram_prefetch_progress(r.lr, &pages, &bytes);
		assert_int_equal(pages, st.prefetch_pages);
		assert_int_equal(bytes, 0); /* the chunks were in the store: nothing fetched */
	}
	for (uint32_t pg = 8; pg < 24; pg++)
		assert_memory_equal(r.ram + (size_t)pg * PG, f->exp + (size_t)pg * PG, PG);
	for (uint32_t pg = 40; pg < 48; pg++)
		assert_memory_equal(r.ram + (size_t)pg * PG, f->exp + (size_t)pg * PG, PG);
	for (uint32_t pg = 64; pg < 88; pg++)
		assert_memory_equal(r.ram + (size_t)pg * PG, f->exp + (size_t)pg * PG, PG);
	lazyram_get_stats(r.lr, &st);
	assert_int_equal(st.faults_missing + st.faults_minor, 0);
	check_all(f, r.ram);
	lazyram_stop(r.lr);
	lazyram_stop(r.lr); /* idempotent */
	restore_end(&r);

	/* a trace of another snapshot is refused */
	f->id[0] ^= 1;
	{
		struct lazyram_opts q = { .map = &f->m, .src = f->src, .cache_dir = f->cache,
					  .fatal = fatal_fail, .prefetch = t };
		struct lazyram *lr;
		int fd;

		memcpy(q.id, f->id, sizeof(f->id));
		assert_int_equal(lazyram_open(&q, &lr, &fd, why, sizeof(why)), -EINVAL);
		assert_non_null(strstr(why, "another snapshot"));
	}
	trace_free(t);
}

static void test_cache_dir(void **state)
{
	struct fx *f = *state;
	struct lazyram_opts o = { .map = &f->m, .src = f->src, .fatal = fatal_fail };
	char dir[PATH_MAX], why[WHY_MAX] = "";
	struct lazyram *lr;
	int fd;

	/* a directory on a disk file system: refused with one line */
	path_fmt(dir, "/var/tmp/lazyram-test-%d", (int)getpid());
	o.cache_dir = dir;
	if (access("/var/tmp", W_OK) == 0 && path_exists("/var/tmp")) {
		int ret = lazyram_open(&o, &lr, &fd, why, sizeof(why));

		rm_rf(dir);
		if (ret == 0)
			lazyram_close(lr); /* /var/tmp is tmpfs here */
		else
			assert_non_null(strstr(why, "not on tmpfs"));
	}
	/* a symbolic link as the cache dir: refused */
	path_fmt(dir, "%s/link", f->dir);
	assert_int_equal(symlink(f->store, dir), 0);
	o.cache_dir = dir;
	assert_int_equal(lazyram_open(&o, &lr, &fd, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "symbolic link"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_read_write_clone, setup, teardown),
		cmocka_unit_test_setup_teardown(test_corrupt, setup, teardown),
		cmocka_unit_test_setup_teardown(test_trace_replay, setup, teardown),
		cmocka_unit_test_setup_teardown(test_cache_dir, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
