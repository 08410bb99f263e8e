/* SPDX-License-Identifier: MIT */
/*
 * blkd/transport/vhost_user: the protocol driven over a socketpair by a fake master. Guest memory is
 * a memfd (mapped here as the master's "user" memory, at another guest-physical address),
 * the rings are written as a driver does (virtq_guest.h), requests are kicked through the
 * kick eventfd and completions awaited on the call eventfd. Then hostile messages: each
 * gets an error reply or a closed connection, and the device keeps serving.
 */
#include "../helpers.h"

#include <endian.h>
#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <linux/virtio_blk.h>
#include <linux/virtio_config.h>

#include "../../../blkd/disk/disk_int.h"
#include "../../../blkd/transport/vhost_user.h"
#include "../../../blkd/transport/vhost_user_proto.h"
#include "../../../blkd/virtio/vring.h"
#include "../virtq_guest.h"

#define DISK (1u << 20)
#define NQ 2u
#define QSIZE 64u
#define BIT(n) (1ull << (n))

struct fx {
	char dir[PATH_MAX], path[PATH_MAX];
	uint8_t *img;
	struct disk be;
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
	struct timeval tv = { .tv_sec = 60 }; /* a bound on a reply, not a timing check */
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
	memset(f, 0, sizeof(*f));
	f->img = malloc(DISK);
	assert_non_null(f->img);
	disk_file_make(f->dir, f->path, f->img, DISK, 7);
	assert_int_equal(disk_raw_open(f->path, false, &f->be), 0);
	assert_int_equal(vhost_user_dev_new(&f->be, NQ, "vu-test", &f->d), 0);
	f->memfd = memfd_create("guest", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(f->memfd >= 0);
	assert_int_equal(ftruncate(f->memfd, TG_SIZE), 0);
	/* as QEMU's memory-backend-memfd (seal=on): the server refuses memory that can shrink */
	assert_int_equal(fcntl(f->memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW), 0);
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
	disk_close(&f->be);
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

/* Submit an IN or OUT of len bytes at sector on queue q (data at *data): its head. */
static uint16_t req_submit(struct fx *f, unsigned q, uint32_t type, uint64_t sector,
			   uint32_t len, uint64_t *data, uint64_t *st)
{
	struct tguest *g = &f->g[q];
	uint64_t h = tg_blk_hdr(g, type, sector);
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
	double end = now_monotonic() + 60; /* a state, waited for generously */

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
	/* a memfd not sealed against shrinking: the master could truncate it under us */
	int unsealed = memfd_create("unsealed", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(unsealed >= 0);
	assert_int_equal(ftruncate(unsealed, 4096), 0);
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, &unsealed, 1), 1);
	assert_int_equal(fcntl(unsealed, F_ADD_SEALS, F_SEAL_GROW), 0);   /* not the one */
	assert_int_equal(m_ack(&f, VU_SET_MEM_TABLE, &t, VU_MEM_HDR_SIZE + 32, &unsealed, 1), 1);
	close(unsealed);
	assert_int_equal(set_mem(&f), 0);
	/* sealed: the master cannot shrink what the server mapped */
	assert_int_equal(ftruncate(f.memfd, TG_SIZE / 2), -1);
	assert_int_equal(errno, EPERM);
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

/* ---- in-flight tracking (INFLIGHT_SHMFD) ------------------------------------------------- */

/* GET_INFLIGHT_FD: the reply's payload and fd (-1 when none came). */
static void m_get_inflight(struct fx *f, uint16_t nq, uint16_t qsize, struct vu_inflight *out,
			   int *fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cm;
	struct vu_inflight in = { .num_queues = nq, .queue_size = qsize };
	uint8_t buf[VU_HDR_SIZE + sizeof(*out)];
	struct iovec iov = { .iov_base = buf, .iov_len = sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.buf,
			     .msg_controllen = sizeof(cm.buf) };
	struct cmsghdr *c;
	struct vu_hdr h;

	*fd = -1;
	m_send(f, VU_GET_INFLIGHT_FD, 0, &in, sizeof(in), NULL, 0);
	assert_int_equal(recvmsg(f->m, &mh, MSG_WAITALL | MSG_CMSG_CLOEXEC), sizeof(buf));
	memcpy(&h, buf, VU_HDR_SIZE);
	assert_int_equal(h.request, VU_GET_INFLIGHT_FD);
	assert_int_equal(h.flags, VU_VERSION | VU_FLAG_REPLY);
	assert_int_equal(h.size, sizeof(*out));
	memcpy(out, buf + VU_HDR_SIZE, sizeof(*out));
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
			assert_int_equal(c->cmsg_len, CMSG_LEN(sizeof(int)));
			memcpy(fd, CMSG_DATA(c), sizeof(int));
		}
}

static int m_set_inflight(struct fx *f, uint64_t size, uint64_t off, uint16_t nq,
			  uint16_t qsize, int fd)
{
	struct vu_inflight p = { .mmap_size = size, .mmap_offset = off, .num_queues = nq,
				 .queue_size = qsize };

	return m_ack(f, VU_SET_INFLIGHT_FD, &p, sizeof(p), &fd, 1);
}

static struct vring_inflight *region_q(void *base, unsigned q)
{
	return (struct vring_inflight *)((uint8_t *)base + q * vring_inflight_size(QSIZE));
}

/* As QEMU: GET_INFLIGHT_FD once, then SET_INFLIGHT_FD with it at every start. */
static void *inflight_setup(struct fx *f, int *ifd, size_t *len)
{
	struct vu_inflight r;
	void *p;

	m_get_inflight(f, NQ, QSIZE, &r, ifd);
	assert_true(*ifd >= 0);
	assert_int_equal(r.mmap_size, NQ * vring_inflight_size(QSIZE));
	assert_int_equal(m_set_inflight(f, r.mmap_size, r.mmap_offset, NQ, QSIZE, *ifd), 0);
	p = mmap(NULL, r.mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, *ifd, 0);
	assert_true(p != MAP_FAILED);
	*len = r.mmap_size;
	return p;
}

static void test_inflight_layout(void **state)
{
	static const struct { uint16_t qs; uint64_t per_queue; } sizes[] = {
		/* 16-byte header + 16 bytes per entry, rounded up to 64 (libvhost-user, DPDK) */
		{ 1, 64 }, { 2, 64 }, { 4, 128 }, { 64, 1088 }, { 128, 2112 }, { 256, 4160 },
		{ 32768, 524352 },
	};
	struct vu_inflight r;
	struct vring_inflight *h;
	struct stat st;
	struct fx f;
	size_t len;
	void *base;
	int fd;

	(void)state;
	fx_open(&f);
	negotiate(&f);
	assert_true(m_get_u64(&f, VU_GET_PROTOCOL_FEATURES) & BIT(VU_PF_INFLIGHT_SHMFD));
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		assert_int_equal(vring_inflight_size(sizes[i].qs), sizes[i].per_queue);
		m_get_inflight(&f, NQ, sizes[i].qs, &r, &fd);
		assert_true(fd >= 0);
		assert_int_equal(r.mmap_size, NQ * sizes[i].per_queue);
		assert_int_equal(r.mmap_offset, 0);
		assert_int_equal(fstat(fd, &st), 0);
		assert_true((uint64_t)st.st_size >= r.mmap_size);
		close(fd);
	}
	/* QEMU's sequence; the queues start, the header is initialised */
	base = inflight_setup(&f, &fd, &len);
	assert_int_equal(set_mem(&f), 0);
	for (unsigned q = 0; q < NQ; q++)
		queue_start(&f, q);
	io_check(&f, 0, 8);
	io_check(&f, 1, 64);
	for (unsigned q = 0; q < NQ; q++) {
		h = region_q(base, q);
		assert_int_equal(h->version, VRING_INFLIGHT_VERSION);
		assert_int_equal(h->desc_num, QSIZE);
		assert_int_equal(h->features, 0);
		/* every request completed: none in flight, used_idx follows the ring */
		assert_int_equal(h->used_idx, tg_used(&f.g[q])->idx);
		assert_int_equal(h->used_idx, 3);
		for (unsigned i = 0; i < QSIZE; i++)
			assert_int_equal(h->desc[i].inflight, 0);
		/* the last batch is the last head returned; heads were popped in order */
		assert_int_equal(h->last_batch_head, tg_used(&f.g[q])->ring[2].id);
		assert_true(h->desc[tg_used(&f.g[q])->ring[0].id].counter <
			    h->desc[tg_used(&f.g[q])->ring[2].id].counter);
	}
	/* a request without a status byte breaks the queue: it is not left in flight */
	struct tg_buf b[] = { { tg_blk_hdr(&f.g[0], VIRTIO_BLK_T_IN, 0), 16, false } };
	uint16_t bad = tg_chain(&f.g[0], b, 1);
	tg_submit(&f.g[0], bad);
	eventfd_write(f.kick[0], 1);
	assert_true(wait_fd(f.err[0], 5000));
	assert_int_equal(region_q(base, 0)->desc[bad].inflight, 0);
	assert_int_equal(region_q(base, 0)->used_idx, 3);
	assert_int_equal(conn_close(&f), 0);
	munmap(base, len);
	close(fd);
	fx_close(&f);
}

#define STUCK_SECTOR 200u

/* A disk whose write at STUCK_SECTOR never returns (after saying so on a pipe). */
struct stuck_be {
	struct disk raw, be;
	int said;
};

static int stuck_write(void *ctx, uint64_t off, uint32_t len, const void *buf, bool fua)
{
	struct stuck_be *s = ctx;

	if (off == STUCK_SECTOR * 512ull) {
		(void)!write(s->said, "x", 1);
		for (;;)
			pause();
	}
	return disk_write(&s->raw, off, len, buf, fua);
}

static int stuck_read(void *ctx, uint64_t off, uint32_t len, void *buf)
{
	struct stuck_be *s = ctx;

	return disk_read(&s->raw, off, len, buf);
}

static int stuck_flush(void *ctx)
{
	struct stuck_be *s = ctx;

	return disk_flush(&s->raw);
}

static const struct disk_ops stuck_ops = {
	.read = stuck_read,
	.write = stuck_write,
	.flush = stuck_flush,
};

/* A server in a child process on the master's socketpair; it can be killed with -9. */
static pid_t child_server(struct fx *f, int said)
{
	int sv[2];
	pid_t pid;

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (!pid) {
		struct stuck_be s = { .said = said };
		struct vhost_user_dev *d;

		close(sv[0]);
		if (disk_raw_open(f->path, false, &s.raw) < 0)
			_exit(2);
		s.be = (struct disk){ .ops = &stuck_ops, .ctx = &s, .size = s.raw.size,
				      .can_flush = true, .can_fua = true };
		if (vhost_user_dev_new(&s.be, NQ, "vu-test", &d) < 0)
			_exit(2);
		_exit(vhost_user_conn_run(d, sv[1], NULL) ? 1 : 0);
	}
	close(sv[1]);
	f->m = sv[0];
	return pid;
}

static void queue_start_base(struct fx *f, unsigned q, uint16_t base)
{
	uint16_t keep = f->g[q].avail_idx;

	f->g[q].avail_idx = base;   /* queue_start() sends it as SET_VRING_BASE */
	queue_start(f, q);
	f->g[q].avail_idx = keep;
}

static uint16_t write_submit(struct fx *f, unsigned q, uint64_t sector, int fill, uint64_t *st)
{
	uint64_t d;
	uint16_t head = req_submit(f, q, VIRTIO_BLK_T_OUT, sector, 4096, &d, st);

	memset(tg_ptr(&f->g[q], d), fill, 4096);
	memset(f->img + sector * 512, fill, 4096);
	return head;
}

/*
 * A server killed with -9 while a write is in flight (its backend write never returns),
 * another request behind it not yet popped: the next server, handed the same in-flight
 * region, completes both exactly once; the data is on the disk.
 */
static void test_inflight_replay(void **state)
{
	struct vring_inflight *h;
	uint64_t st1, st2, st3;
	uint16_t w1, w2, w3;
	uint32_t id, len;
	int pfd[2], ifd, status;
	struct fx f;
	size_t rlen;
	void *base;
	pid_t pid;
	char c;

	(void)state;
	fx_open(&f);
	assert_int_equal(conn_close(&f), 0);   /* this test's first server is a child */
	assert_int_equal(pipe(pfd), 0);
	pid = child_server(&f, pfd[1]);
	negotiate(&f);
	base = inflight_setup(&f, &ifd, &rlen);
	assert_int_equal(set_mem(&f), 0);
	for (unsigned q = 0; q < NQ; q++)
		queue_start(&f, q);
	w1 = write_submit(&f, 0, 8, 0x11, &st1);
	kick_wait(&f, 0, 1);
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g[0], st1), VIRTIO_BLK_S_OK);
	w2 = write_submit(&f, 0, STUCK_SECTOR, 0x22, &st2);
	w3 = write_submit(&f, 0, 16, 0x33, &st3);
	eventfd_write(f.kick[0], 1);
	assert_int_equal(read(pfd[0], &c, 1), 1);   /* the server is inside w2's write */
	assert_int_equal(kill(pid, SIGKILL), 0);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status));
	close(f.m);
	close(pfd[0]);
	close(pfd[1]);

	/* what the dead server left: w2 in flight, w3 never popped, one used entry */
	h = region_q(base, 0);
	assert_int_equal(tg_used(&f.g[0])->idx, 1);
	assert_int_equal(h->used_idx, 1);
	assert_int_equal(h->desc[w1].inflight, 0);
	assert_int_equal(h->desc[w2].inflight, 1);
	assert_int_equal(h->desc[w3].inflight, 0);
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g[0], st2), 0xee);

	/* a new server; the master (as QEMU after losing its backend) sends base = used idx */
	conn_open(&f);
	negotiate(&f);
	assert_int_equal(m_set_inflight(&f, rlen, 0, NQ, QSIZE, ifd), 0);
	assert_int_equal(set_mem(&f), 0);
	queue_start_base(&f, 0, 1);
	queue_start(&f, 1);
	/* no kick needed: the queue resubmits w2 and then pops w3 when it starts */
	double end = now_monotonic() + 60; /* a state, waited for generously */
	while (__atomic_load_n(&tg_used(&f.g[0])->idx, __ATOMIC_ACQUIRE) < 3) {
		assert_true(now_monotonic() < end);
		wait_fd(f.call[0], 100);
	}
	usleep(100 * 1000);
	assert_int_equal(tg_used(&f.g[0])->idx, 3);   /* each once, nothing more */
	assert_int_equal(tg_used(&f.g[0])->ring[0].id, w1);
	assert_true(tg_get_used(&f.g[0], &id, &len));
	assert_int_equal(id, w2);
	assert_int_equal(len, 1);
	assert_true(tg_get_used(&f.g[0], &id, &len));
	assert_int_equal(id, w3);
	assert_false(tg_get_used(&f.g[0], &id, &len));
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g[0], st2), VIRTIO_BLK_S_OK);
	assert_int_equal(*(uint8_t *)tg_ptr(&f.g[0], st3), VIRTIO_BLK_S_OK);
	assert_int_equal(h->used_idx, 3);
	for (unsigned i = 0; i < QSIZE; i++)
		assert_int_equal(h->desc[i].inflight, 0);
	/* the queue goes on normally */
	io_check(&f, 0, 32);
	io_check(&f, 1, 40);
	assert_int_equal(conn_close(&f), 0);

	uint8_t *disk = malloc(DISK);
	int fd = open(f.path, O_RDONLY);
	assert_non_null(disk);
	assert_int_equal(pread(fd, disk, DISK, 0), DISK);
	close(fd);
	assert_memory_equal(disk, f.img, DISK);
	free(disk);
	munmap(base, rlen);
	close(ifd);
	fx_close(&f);
}

/*
 * A server that died after publishing used->idx but before clearing the entry: the last
 * batch says that request is complete, so it is not executed again.
 */
static void test_inflight_last_batch(void **state)
{
	struct vring_inflight *h;
	uint64_t s1;
	uint16_t w;
	struct fx f;
	size_t rlen;
	void *base;
	int ifd;

	(void)state;
	fx_open(&f);
	negotiate(&f);
	base = inflight_setup(&f, &ifd, &rlen);
	assert_int_equal(set_mem(&f), 0);
	queue_start(&f, 0);
	w = write_submit(&f, 0, 8, 0x44, &s1);
	kick_wait(&f, 0, 1);
	assert_int_equal(conn_close(&f), 0);
	/* the state between the used->idx store and the clearing */
	h = region_q(base, 0);
	assert_int_equal(h->last_batch_head, w);
	h->desc[w].inflight = 1;
	h->used_idx = 0;
	/* the guest's next write goes to the same sector: a replay of w would undo it */
	conn_open(&f);
	negotiate(&f);
	assert_int_equal(m_set_inflight(&f, rlen, 0, NQ, QSIZE, ifd), 0);
	assert_int_equal(set_mem(&f), 0);
	queue_start_base(&f, 0, 1);
	/* until the queue has taken the region in hand (not a fixed 100 ms: a state) */
	double end = now_monotonic() + 60;
	while (__atomic_load_n(&h->used_idx, __ATOMIC_ACQUIRE) != 1 ||
	       __atomic_load_n(&h->desc[w].inflight, __ATOMIC_ACQUIRE) != 0) {
		assert_true(now_monotonic() < end);
		usleep(1000);
	}
	assert_int_equal(tg_used(&f.g[0])->idx, 1);
	assert_int_equal(h->desc[w].inflight, 0);
	assert_int_equal(h->used_idx, 1);
	write_submit(&f, 0, 8, 0x55, &s1);
	kick_wait(&f, 0, 1);
	io_check(&f, 0, 8);   /* reads back 0x55 first */
	assert_int_equal(tg_used(&f.g[0])->idx, 5);
	assert_int_equal(conn_close(&f), 0);
	munmap(base, rlen);
	close(ifd);
	fx_close(&f);
}

/* Malformed GET/SET_INFLIGHT_FD close the connection; refused ones get an error. */
static void test_inflight_bad(void **state)
{
	struct vu_inflight r = { .num_queues = NQ, .queue_size = QSIZE };
	uint64_t need = NQ * vring_inflight_size(QSIZE);
	int fds[2], small, pfd[2], fd;
	struct fx f;

	(void)state;
	fx_open(&f);
	fds[0] = fds[1] = f.memfd;
	/* malformed: sizes, a missing fd, unexpected fds */
	m_send(&f, VU_GET_INFLIGHT_FD, 0, &r, 16, NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_GET_INFLIGHT_FD, 0, &r, sizeof(r), fds, 1);
	expect_closed(&f);
	conn_open(&f);
	uint8_t big[sizeof(r) + 8] = { 0 };
	memcpy(big, &r, sizeof(r));
	m_send(&f, VU_SET_INFLIGHT_FD, 0, big, sizeof(big), fds, 1);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_SET_INFLIGHT_FD, 0, &r, sizeof(r), NULL, 0);
	expect_closed(&f);
	conn_open(&f);
	m_send(&f, VU_SET_INFLIGHT_FD, 0, &r, sizeof(r), fds, 2);
	expect_closed(&f);

	/* well-formed but refused: GET says "no region" (size 0, no fd), SET fails */
	conn_open(&f);
	m_get_inflight(&f, NQ, QSIZE, &r, &fd);   /* protocol feature not negotiated */
	assert_int_equal(r.mmap_size, 0);
	assert_int_equal(fd, -1);
	negotiate(&f);
	m_get_inflight(&f, 0, QSIZE, &r, &fd);
	assert_true(r.mmap_size == 0 && fd == -1);
	m_get_inflight(&f, NQ + 1, QSIZE, &r, &fd);
	assert_true(r.mmap_size == 0 && fd == -1);
	m_get_inflight(&f, NQ, 100, &r, &fd);
	assert_true(r.mmap_size == 0 && fd == -1);
	m_get_inflight(&f, NQ, 0, &r, &fd);
	assert_true(r.mmap_size == 0 && fd == -1);
	small = memfd_create("small", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	assert_true(small >= 0);
	assert_int_equal(ftruncate(small, need), 0);
	/* not sealed against shrinking: refused */
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, QSIZE, small), 1);
	assert_int_equal(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK), 0);
	/* too small for num_queues x queue_size */
	assert_int_equal(m_set_inflight(&f, need - 64, 0, NQ, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, 2 * QSIZE, small), 1);
	/* beyond the end of the file; an offset not page-aligned or overflowing */
	assert_int_equal(m_set_inflight(&f, need, 4096, NQ, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need * 4, 0, NQ, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need, 100, NQ, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need, UINT64_MAX - 4095, NQ, QSIZE, small), 1);
	/* bad queue counts and sizes; not a memory file */
	assert_int_equal(m_set_inflight(&f, need, 0, 0, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need, 0, 300, QSIZE, small), 1);
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, 48, small), 1);
	assert_int_equal(pipe(pfd), 0);
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, QSIZE, pfd[0]), 1);
	close(pfd[0]);
	close(pfd[1]);
	/* a region for a smaller queue size: accepted, but those rings are not tracked */
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, QSIZE / 2, small), 0);
	/* the connection is still good, the device serves */
	assert_int_equal(set_mem(&f), 0);
	for (unsigned q = 0; q < NQ; q++)
		queue_start(&f, q);
	io_check(&f, 0, 8);
	/* and with a good region */
	assert_int_equal(m_set_inflight(&f, need, 0, NQ, QSIZE, small), 0);
	io_check(&f, 1, 16);
	assert_int_equal(conn_close(&f), 0);
	close(small);
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
		cmocka_unit_test(test_inflight_layout),
		cmocka_unit_test(test_inflight_replay),
		cmocka_unit_test(test_inflight_last_batch),
		cmocka_unit_test(test_inflight_bad),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
