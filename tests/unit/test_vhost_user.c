/* SPDX-License-Identifier: MIT */
/*
 * blkd/vhost_user: the protocol driven over a socketpair by a fake master. Guest memory is
 * a memfd (mapped here as the master's "user" memory, at another guest-physical address),
 * the rings are written as a driver does (virtq_guest.h), requests are kicked through the
 * kick eventfd and completions awaited on the call eventfd. Then hostile messages: each
 * gets an error reply or a closed connection, and the device keeps serving.
 */
#include "helpers.h"

#include <endian.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>

#include "../../blkd/vhost_user.h"
#include "../../blkd/vhost_user_proto.h"
#include "virtq_guest.h"

#define DISK (1u << 20)
#define NQ 2u
#define QSIZE 64u
#define BIT(n) (1ull << (n))

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t *img;
	struct vblk_backend be;
	struct vhost_user_dev *d;
	/* the connection */
	int m;                     /* the master's end */
	pthread_t srv;
	int srv_ret;
	bool connected;
	/* guest memory: one memfd, one ring per queue in it */
	int memfd;
	uint8_t *ram;
	struct tguest g[NQ];
	int kick[NQ], call[NQ], err[NQ];
};

struct srv_arg {
	struct fx *f;
	int fd;
};

static void *srv_main(void *arg)
{
	struct srv_arg *a = arg;

	a->f->srv_ret = vhost_user_conn_run(a->f->d, a->fd, NULL);
	free(a);
	return NULL;
}

static void conn_open(struct fx *f)
{
	struct timeval tv = { .tv_sec = 5 };
	struct srv_arg *a = malloc(sizeof(*a));
	int sv[2];

	assert_non_null(a);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	f->m = sv[0];
	a->f = f;
	a->fd = sv[1];
	f->srv_ret = 1;
	assert_int_equal(pthread_create(&f->srv, NULL, srv_main, a), 0);
	f->connected = true;
}

/* Close the master's end; the server's return value. */
static int conn_close(struct fx *f)
{
	if (!f->connected)
		return f->srv_ret;
	close(f->m);
	pthread_join(f->srv, NULL);
	f->connected = false;
	return f->srv_ret;
}

/* Rings of queue q in the shared memory: queue 0 in the first half, 1 in the second. */
static void guest_init(struct fx *f, unsigned q)
{
	struct tguest *g = &f->g[q];

	memset(g, 0, sizeof(*g));
	g->ram = f->ram;
	g->mem.n = 1;
	g->mem.r[0] = (struct gmem_region){ .gpa = TG_GPA, .size = TG_SIZE, .host = f->ram };
	g->brk = TG_GPA + q * (TG_SIZE / 2);
	g->num = QSIZE;
	g->desc = tg_alloc(g, 16ull * QSIZE, 4096);
	g->avail = tg_alloc(g, 6 + 2ull * QSIZE, 4096);
	g->used = tg_alloc(g, 6 + 8ull * QSIZE, 4096);
}

static void fx_open(struct fx *f)
{
	uint64_t seed = 7;

	memset(f, 0, sizeof(*f));
	tmpdir_make(f->dir);
	path_fmt(f->path, "%s/disk.raw", f->dir);
	f->img = malloc(DISK);
	assert_non_null(f->img);
	prng_fill(&seed, f->img, DISK);
	write_file(f->path, f->img, DISK);
	assert_int_equal(vblk_backend_raw_open(f->path, false, &f->be), 0);
	assert_int_equal(vhost_user_dev_new(&f->be, NQ, "vu-test", &f->d), 0);
	f->memfd = memfd_create("guest", MFD_CLOEXEC);
	assert_true(f->memfd >= 0);
	assert_int_equal(ftruncate(f->memfd, TG_SIZE), 0);
	f->ram = mmap(NULL, TG_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, f->memfd, 0);
	assert_true(f->ram != MAP_FAILED);
	for (unsigned q = 0; q < NQ; q++) {
		guest_init(f, q);
		f->kick[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		f->call[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		f->err[q] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	}
	conn_open(f);
}

static void fx_close(struct fx *f)
{
	conn_close(f);
	vhost_user_dev_free(f->d);
	for (unsigned q = 0; q < NQ; q++) {
		close(f->kick[q]);
		close(f->call[q]);
		close(f->err[q]);
	}
	munmap(f->ram, TG_SIZE);
	close(f->memfd);
	vblk_backend_raw_close(&f->be);
	free(f->img);
	rm_rf(f->dir);
}

/* ---- the fake master ------------------------------------------------------------------ */

static void m_send_raw(struct fx *f, const void *buf, size_t len, const int *fds, unsigned nfds)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 16)];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = cm.buf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	/* the server may have dropped us already: that is for the caller to see */
	(void)sendmsg(f->m, &mh, MSG_NOSIGNAL);
}

static void m_send(struct fx *f, uint32_t req, uint32_t flags, const void *payload,
		   uint32_t size, const int *fds, unsigned nfds)
{
	uint8_t buf[VU_HDR_SIZE + 512];
	struct vu_hdr h = { .request = req, .flags = VU_VERSION | flags, .size = size };

	memcpy(buf, &h, VU_HDR_SIZE);
	if (size)
		memcpy(buf + VU_HDR_SIZE, payload, size);
	m_send_raw(f, buf, VU_HDR_SIZE + size, fds, nfds);
}

/* A reply to req: its payload size, or -1 when the server closed the connection. */
static int m_recv(struct fx *f, uint32_t req, void *payload, size_t max)
{
	struct vu_hdr h;
	ssize_t n = recv(f->m, &h, sizeof(h), MSG_WAITALL);

	if (n == 0)
		return -1;
	assert_int_equal(n, sizeof(h));
	assert_int_equal(h.request, req);
	assert_int_equal(h.flags, VU_VERSION | VU_FLAG_REPLY);
	assert_true(h.size <= max);
	if (h.size)
		assert_int_equal(recv(f->m, payload, h.size, MSG_WAITALL), h.size);
	return (int)h.size;
}

static uint64_t m_get_u64(struct fx *f, uint32_t req)
{
	uint64_t v;

	m_send(f, req, 0, NULL, 0, NULL, 0);
	assert_int_equal(m_recv(f, req, &v, sizeof(v)), 8);
	return v;
}

/* A request with REPLY_ACK: the server's status (0 success), -1 if it hung up. */
static int m_ack(struct fx *f, uint32_t req, const void *payload, uint32_t size,
		 const int *fds, unsigned nfds)
{
	uint64_t v;

	m_send(f, req, VU_FLAG_NEED_REPLY, payload, size, fds, nfds);
	if (m_recv(f, req, &v, sizeof(v)) < 0)
		return -1;
	return (int)v;
}

static int m_ack_u64(struct fx *f, uint32_t req, uint64_t v)
{
	return m_ack(f, req, &v, 8, NULL, 0);
}

static int m_ack_state(struct fx *f, uint32_t req, uint32_t idx, uint32_t num)
{
	struct vu_vring_state s = { idx, num };

	return m_ack(f, req, &s, sizeof(s), NULL, 0);
}

/* The server hung up: EOF on the master's end. */
static void expect_closed(struct fx *f)
{
	char c;

	assert_int_equal(recv(f->m, &c, 1, 0), 0);
	assert_int_equal(conn_close(f), -EPROTO);
}

static uint64_t uva(struct fx *f, uint64_t gpa)
{
	return (uint64_t)(uintptr_t)(f->ram + (gpa - TG_GPA));
}

static int set_mem(struct fx *f)
{
	struct vu_mem_table t = { .nregions = 1 };

	t.r[0] = (struct vu_region){ .gpa = TG_GPA, .size = TG_SIZE, .uva = uva(f, TG_GPA) };
	return m_ack(f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, &f->memfd, 1);
}

static int set_addr(struct fx *f, unsigned q, uint64_t desc, uint64_t avail, uint64_t used)
{
	struct vu_vring_addr a = { .index = q, .desc = desc, .avail = avail, .used = used };

	return m_ack(f, VU_SET_VRING_ADDR, &a, sizeof(a), NULL, 0);
}

static int set_fd(struct fx *f, uint32_t req, unsigned q, int fd)
{
	uint64_t v = q;

	return m_ack(f, req, &v, 8, &fd, 1);
}

static void negotiate(struct fx *f)
{
	uint64_t feat = m_get_u64(f, VU_GET_FEATURES), pf;

	assert_true(feat & BIT(VU_F_PROTOCOL_FEATURES));
	assert_true(feat & BIT(VIRTIO_F_VERSION_1));
	pf = m_get_u64(f, VU_GET_PROTOCOL_FEATURES);
	assert_true(pf & BIT(VU_PF_REPLY_ACK));
	assert_true(pf & BIT(VU_PF_CONFIG));
	assert_true(pf & BIT(VU_PF_MQ));
	m_send(f, VU_SET_PROTOCOL_FEATURES, 0, &pf, 8, NULL, 0);
	assert_int_equal(m_get_u64(f, VU_GET_QUEUE_NUM), NQ);
	assert_int_equal(m_ack(f, VU_SET_OWNER, NULL, 0, NULL, 0), 0);
	/* no event idx here: an interrupt after every batch */
	assert_int_equal(m_ack_u64(f, VU_SET_FEATURES,
				   BIT(VU_F_PROTOCOL_FEATURES) | BIT(VIRTIO_F_VERSION_1) |
				   BIT(VIRTQ_F_INDIRECT_DESC) | BIT(VIRTIO_BLK_F_FLUSH)), 0);
}

static void queue_start(struct fx *f, unsigned q)
{
	struct tguest *g = &f->g[q];

	assert_int_equal(m_ack_state(f, VU_SET_VRING_NUM, q, QSIZE), 0);
	assert_int_equal(m_ack_state(f, VU_SET_VRING_BASE, q, g->avail_idx), 0);
	assert_int_equal(set_addr(f, q, uva(f, g->desc), uva(f, g->avail), uva(f, g->used)), 0);
	assert_int_equal(set_fd(f, VU_SET_VRING_CALL, q, f->call[q]), 0);
	assert_int_equal(set_fd(f, VU_SET_VRING_ERR, q, f->err[q]), 0);
	assert_int_equal(set_fd(f, VU_SET_VRING_KICK, q, f->kick[q]), 0);
	assert_int_equal(m_ack_state(f, VU_SET_VRING_ENABLE, q, 1), 0);
}

static void setup_all(struct fx *f)
{
	negotiate(f);
	assert_int_equal(set_mem(f), 0);
	for (unsigned q = 0; q < NQ; q++)
		queue_start(f, q);
}

static bool wait_fd(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	eventfd_t v;

	if (poll(&p, 1, ms) != 1)
		return false;
	return eventfd_read(fd, &v) == 0;
}

static uint64_t hdr_new(struct tguest *g, uint32_t type, uint64_t sector)
{
	uint64_t h = tg_alloc(g, 16, 8);
	uint8_t *p = tg_ptr(g, h);
	uint32_t t = htole32(type);
	uint64_t s = htole64(sector);

	memset(p, 0, 16);
	memcpy(p, &t, 4);
	memcpy(p + 8, &s, 8);
	return h;
}

/* Submit an IN or OUT of len bytes at sector on queue q (data at *data): its head. */
static uint16_t req_submit(struct fx *f, unsigned q, uint32_t type, uint64_t sector,
			   uint32_t len, uint64_t *data, uint64_t *st)
{
	struct tguest *g = &f->g[q];
	uint64_t h = hdr_new(g, type, sector);
	uint16_t head;

	*data = tg_alloc(g, len, 512);
	*st = tg_alloc(g, 1, 1);
	*(uint8_t *)tg_ptr(g, *st) = 0xee;
	struct tg_buf b[] = { { h, 16, false }, { *data, len, type == VIRTIO_BLK_T_IN },
			      { *st, 1, true } };
	head = tg_chain(g, b, 3);
	tg_submit(g, head);
	return head;
}

/* Kick q and wait for n completions (the call eventfd). */
static void kick_wait(struct fx *f, unsigned q, unsigned n)
{
	uint32_t id, len;
	unsigned got = 0;
	double end = now_monotonic() + 5;

	eventfd_write(f->kick[q], 1);
	while (got < n) {
		assert_true(now_monotonic() < end);
		if (!tg_get_used(&f->g[q], &id, &len)) {
			wait_fd(f->call[q], 100);
			continue;
		}
		got++;
	}
}

static void io_check(struct fx *f, unsigned q, uint64_t sector)
{
	uint64_t d1, s1, d2, s2;

	/* read, then write a pattern and read it back */
	req_submit(f, q, VIRTIO_BLK_T_IN, sector, 4096, &d1, &s1);
	kick_wait(f, q, 1);
	assert_int_equal(*(uint8_t *)tg_ptr(&f->g[q], s1), VIRTIO_BLK_S_OK);
	assert_memory_equal(tg_ptr(&f->g[q], d1), f->img + sector * 512, 4096);
	req_submit(f, q, VIRTIO_BLK_T_OUT, sector, 4096, &d2, &s2);
	memset(tg_ptr(&f->g[q], d2), 0x5a + (int)q, 4096);
	memset(f->img + sector * 512, 0x5a + (int)q, 4096);
	eventfd_write(f->kick[q], 1);   /* a second kick before the first is taken: fine */
	kick_wait(f, q, 1);
	assert_int_equal(*(uint8_t *)tg_ptr(&f->g[q], s2), VIRTIO_BLK_S_OK);
	req_submit(f, q, VIRTIO_BLK_T_IN, sector, 4096, &d1, &s1);
	kick_wait(f, q, 1);
	assert_memory_equal(tg_ptr(&f->g[q], d1), f->img + sector * 512, 4096);
}

/* ---- tests ----------------------------------------------------------------------------- */

static void test_negotiation_config(void **state)
{
	struct fx f;
	struct vu_config c = { .offset = 0, .size = VBLK_CONFIG_SIZE };
	struct virtio_blk_config bc;

	(void)state;
	fx_open(&f);
	negotiate(&f);
	m_send(&f, VU_GET_CONFIG, 0, &c, VU_CONFIG_HDR_SIZE + c.size, NULL, 0);
	assert_int_equal(m_recv(&f, VU_GET_CONFIG, &c, sizeof(c)),
			 VU_CONFIG_HDR_SIZE + VBLK_CONFIG_SIZE);
	memcpy(&bc, c.data, VBLK_CONFIG_SIZE);
	assert_int_equal(le64toh(bc.capacity), DISK / 512);
	assert_int_equal(le32toh(bc.blk_size), 512);
	assert_int_equal(le32toh(bc.seg_max), VBLK_SEG_MAX);
	assert_int_equal(le16toh(bc.num_queues), NQ);
	/* SET_CONFIG is accepted and changes nothing */
	c.size = 4;
	assert_int_equal(m_ack(&f, VU_SET_CONFIG, &c, VU_CONFIG_HDR_SIZE + 4, NULL, 0), 0);
	/* features not offered, or without VERSION_1: refused, the connection stays */
	assert_int_equal(m_ack_u64(&f, VU_SET_FEATURES, BIT(VIRTIO_F_VERSION_1) | BIT(40)), 1);
	assert_int_equal(m_ack_u64(&f, VU_SET_FEATURES, BIT(VIRTQ_F_INDIRECT_DESC)), 1);
	assert_int_equal(m_ack_u64(&f, VU_SET_PROTOCOL_FEATURES, BIT(1)), 1);
	assert_int_equal(m_get_u64(&f, VU_GET_QUEUE_NUM), NQ);
	assert_int_equal(conn_close(&f), 0);
	fx_close(&f);
}

static void test_io_two_queues(void **state)
{
	struct fx f;
	struct vblk_stats st;
	struct vu_vring_state s = { .index = 0 };

	(void)state;
	fx_open(&f);
	setup_all(&f);
	io_check(&f, 0, 8);
	io_check(&f, 1, 800);
	/* both queues at once, several requests each */
	for (unsigned q = 0; q < NQ; q++) {
		uint64_t d, s1;

		for (unsigned i = 0; i < 8; i++)
			req_submit(&f, q, VIRTIO_BLK_T_IN, 64 * i + q, 8192, &d, &s1);
	}
	for (unsigned q = 0; q < NQ; q++)
		eventfd_write(f.kick[q], 1);
	kick_wait(&f, 0, 8);
	kick_wait(&f, 1, 8);
	/* GET_VRING_BASE stops the ring and says where; restarted from there, it serves */
	m_send(&f, VU_GET_VRING_BASE, 0, &s, sizeof(s), NULL, 0);
	assert_int_equal(m_recv(&f, VU_GET_VRING_BASE, &s, sizeof(s)), sizeof(s));
	assert_int_equal(s.num, f.g[0].avail_idx);
	queue_start(&f, 0);
	io_check(&f, 0, 16);
	vhost_user_dev_stats(f.d, &st);
	assert_true(st.reads >= 6 + 16);
	assert_int_equal(st.writes, 3);
	assert_int_equal(st.ioerr, 0);
	/* a new mem table while the queues run: they go on with it */
	assert_int_equal(set_mem(&f), 0);
	io_check(&f, 1, 24);
	assert_int_equal(conn_close(&f), 0);

	/* the master comes back (a reconnect): the device was reset, everything again */
	conn_open(&f);
	setup_all(&f);
	io_check(&f, 0, 32);
	io_check(&f, 1, 40);
	assert_int_equal(conn_close(&f), 0);
	/* the disk holds what was written */
	uint8_t *disk = malloc(DISK);
	int fd = open(f.path, O_RDONLY);
	assert_non_null(disk);
	assert_int_equal(pread(fd, disk, DISK, 0), DISK);
	close(fd);
	assert_memory_equal(disk, f.img, DISK);
	free(disk);
	fx_close(&f);
}

/* Each message here is malformed: the connection is dropped and a new one works. */
static void test_malformed(void **state)
{
	struct fx f;
	uint64_t u = 0;
	struct vu_mem_table t = { .nregions = 2 };
	int fds[9];

	(void)state;
	fx_open(&f);
	for (int i = 0; i < 9; i++)
		fds[i] = f.memfd;

	/* a short header, then end of stream */
	m_send_raw(&f, "\x01\x00\x00\x00\x01\x00", 6, NULL, 0);
	shutdown(f.m, SHUT_WR);
	expect_closed(&f);
	/* a bad version */
	conn_open(&f);
	struct vu_hdr h = { .request = VU_GET_FEATURES, .flags = 2, .size = 0 };
	m_send_raw(&f, &h, sizeof(h), NULL, 0);
	expect_closed(&f);
	/* payload sizes that do not match the request */
	conn_open(&f);
	m_send(&f, VU_SET_FEATURES, 0, &u, 4, NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_SET_VRING_ADDR, 0, &t, 24, NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	h = (struct vu_hdr){ .request = VU_GET_CONFIG, .flags = VU_VERSION, .size = 100000 };
	m_send_raw(&f, &h, sizeof(h), NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	struct vu_config c = { .size = 200 };
	m_send(&f, VU_GET_CONFIG, 0, &c, VU_CONFIG_HDR_SIZE + 8, NULL, 0);
	expect_closed(&f);
	/* a header announcing more payload than ever comes: the server gives up */
	conn_open(&f);
	h = (struct vu_hdr){ .request = VU_SET_FEATURES, .flags = VU_VERSION, .size = 8 };
	m_send_raw(&f, &h, sizeof(h), NULL, 0);
	shutdown(f.m, SHUT_WR);
	expect_closed(&f);
	/* an unknown request, a known one not offered */
	conn_open(&f);
	m_send(&f, 99, 0, NULL, 0, NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_SET_LOG_BASE, 0, &u, 8, NULL, 0);
	expect_closed(&f);
	/* file descriptors: missing, unexpected, too many */
	conn_open(&f);
	m_send(&f, VU_SET_VRING_KICK, 0, &u, 8, NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_GET_FEATURES, 0, NULL, 0, fds, 1);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_SET_MEM_TABLE, 0, &t, VU_MEM_HDR_SIZE + 64, fds, 1);
	expect_closed(&f);
	conn_open(&f);
	t.nregions = 8;
	m_send(&f, VU_SET_MEM_TABLE, 0, &t, VU_MEM_HDR_SIZE + 256, fds, 9);
	expect_closed(&f);
	conn_open(&f);
	t.nregions = 9;
	m_send(&f, VU_SET_MEM_TABLE, 0, &t, VU_MEM_HDR_SIZE + 256, fds, 8);
	expect_closed(&f);
	u = VU_VRING_NOFD;
	conn_open(&f);
	m_send(&f, VU_SET_VRING_CALL, 0, &u, 8, fds, 1);
	expect_closed(&f);

	/* after all that: a working device */
	conn_open(&f);
	setup_all(&f);
	io_check(&f, 0, 8);
	fx_close(&f);
}

/* Well-formed but refused: an error reply, the connection stays. */
static void test_refused(void **state)
{
	struct fx f;
	struct vu_mem_table t = { .nregions = 2 };
	int fds[2];
	uint64_t v;

	(void)state;
	fx_open(&f);
	negotiate(&f);
	fds[0] = fds[1] = f.memfd;
	/* overlapping regions: in guest-physical space, in the master's space */
	t.r[0] = (struct vu_region){ .gpa = TG_GPA, .size = 2 << 20, .uva = uva(&f, TG_GPA) };
	t.r[1] = (struct vu_region){ .gpa = TG_GPA + (1 << 20), .size = 2 << 20,
				     .uva = uva(&f, TG_GPA) + (4 << 20), .mmap_offset = 1 << 20 };
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 64, fds, 2), 1);
	t.r[1].gpa = TG_GPA + (8 << 20);
	t.r[1].uva = uva(&f, TG_GPA) + (1 << 20);
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 64, fds, 2), 1);
	/* a region past the end of its file (it would SIGBUS), a zero-sized one */
	t.nregions = 1;
	t.r[0].size = TG_SIZE;
	t.r[0].mmap_offset = 4096;
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, fds, 1), 1);
	t.r[0].size = 0;
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, fds, 1), 1);
	/* not a memory file */
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	t.r[0].size = 4096;
	t.r[0].mmap_offset = 0;
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, pfd, 1), 1);
	close(pfd[0]);
	close(pfd[1]);
	assert_int_equal(set_mem(&f), 0);
	/* queues that do not exist, bad ring sizes */
	assert_int_equal(m_ack_state(&f, VU_SET_VRING_NUM, NQ, QSIZE), 1);
	assert_int_equal(m_ack_state(&f, VU_SET_VRING_NUM, 0, 100), 1);
	assert_int_equal(m_ack_state(&f, VU_SET_VRING_NUM, 0, 0), 1);
	assert_int_equal(m_ack_state(&f, VU_SET_VRING_ENABLE, 300, 1), 1);
	assert_int_equal(set_fd(&f, VU_SET_VRING_CALL, NQ + 5, f.call[0]), 1);
	v = 0 | VU_VRING_NOFD;
	assert_int_equal(m_ack(&f, VU_SET_VRING_KICK, &v, 8, NULL, 0), 1);   /* polling */
	/* rings outside the shared memory (user addresses the regions do not cover) */
	assert_int_equal(m_ack_state(&f, VU_SET_VRING_NUM, 0, QSIZE), 0);
	assert_int_equal(set_addr(&f, 0, uva(&f, f.g[0].desc) + TG_SIZE, uva(&f, f.g[0].avail),
				  uva(&f, f.g[0].used)), 1);
	assert_int_equal(set_addr(&f, 0, uva(&f, f.g[0].desc), uva(&f, f.g[0].avail),
				  uva(&f, TG_GPA + TG_SIZE - 16)), 1);
	assert_int_equal(set_addr(&f, 0, f.g[0].desc, f.g[0].avail, f.g[0].used), 1);  /* GPAs */
	/* the connection is still good */
	assert_int_equal(m_get_u64(&f, VU_GET_QUEUE_NUM), NQ);
	for (unsigned q = 0; q < NQ; q++)
		queue_start(&f, q);
	io_check(&f, 0, 8);
	assert_int_equal(conn_close(&f), 0);
	fx_close(&f);
}

/* A guest that breaks its ring: that queue stops (error eventfd), the other goes on. */
static void test_guest_breaks_ring(void **state)
{
	struct fx f;
	struct tguest *g;
	uint64_t d, s;

	(void)state;
	fx_open(&f);
	setup_all(&f);
	g = &f.g[0];
	/* the available index moves by more than the ring size */
	g->avail_idx += QSIZE + 3;
	__atomic_store_n(&tg_avail(g)->idx, g->avail_idx, __ATOMIC_RELEASE);
	eventfd_write(f.kick[0], 1);
	assert_true(wait_fd(f.err[0], 5000));
	/* a buffer outside guest memory: an I/O error for that request only (queue 1) */
	req_submit(&f, 1, VIRTIO_BLK_T_IN, 0, 4096, &d, &s);
	tg_desc(&f.g[1], (uint16_t)(f.g[1].next_desc - 2))->addr = TG_GPA + TG_SIZE;
	kick_wait(&f, 1, 1);
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g[1], s), VIRTIO_BLK_S_IOERR);
	io_check(&f, 1, 8);
	/* a descriptor table that loops, on queue 1: it breaks too */
	struct tg_buf b[] = { { TG_GPA, 16, false }, { TG_GPA + 16, 1, true } };
	uint16_t head = tg_chain(&f.g[1], b, 2);
	tg_desc(&f.g[1], (uint16_t)(head + 1))->flags |= VIRTQ_DESC_F_NEXT;
	tg_desc(&f.g[1], (uint16_t)(head + 1))->next = head;
	tg_desc(&f.g[1], (uint16_t)(head + 1))->flags &= (uint16_t)~VIRTQ_DESC_F_WRITE;
	tg_submit(&f.g[1], head);
	eventfd_write(f.kick[1], 1);
	assert_true(wait_fd(f.err[1], 5000));
	/* the master resets the ring (as after a guest's device reset): served again */
	struct vu_vring_state vs = { .index = 0 };
	m_send(&f, VU_GET_VRING_BASE, 0, &vs, sizeof(vs), NULL, 0);
	assert_int_equal(m_recv(&f, VU_GET_VRING_BASE, &vs, sizeof(vs)), sizeof(vs));
	assert_int_equal(vs.num, 0);   /* where it broke */
	f.g[0].avail_idx = f.g[0].last_used = f.g[0].next_desc = 0;
	__atomic_store_n(&tg_avail(&f.g[0])->idx, 0, __ATOMIC_RELEASE);
	tg_used(&f.g[0])->idx = 0;
	queue_start(&f, 0);
	io_check(&f, 0, 16);
	assert_int_equal(conn_close(&f), 0);
	fx_close(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_negotiation_config),
		cmocka_unit_test(test_io_two_queues),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_guest_breaks_ring),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
