/* SPDX-License-Identifier: MIT */
/*
 * The vhost-user-blk backend's side of one master (blkd/export: vhost_user_conn_run, the
 * messages of vhost_user_msg.c, the memory table of vhost_user_mem.c, the queues and the
 * in-flight region): the input is the master's messages, each a 12-byte header and the
 * payload its size field says. The sender attaches the descriptors a message needs, as a
 * master would: one per memory region of SET_MEM_TABLE (the same 64 KiB memfd: the guest's
 * memory), an eventfd for SET_VRING_KICK/CALL/ERR (unless the payload says NOFD; a kick is
 * signalled at once), a memfd for SET_INFLIGHT_FD. A message of request FILL_MEMORY is not
 * sent: its payload is written at the start of the guest's memory (rings and requests).
 */
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include "fuzz_disk.h"
#include "fuzz_sockpair.h"
#include "../blkd/transport/vhost_user.h"
#include "../blkd/transport/vhost_user_proto.h"

#define GUEST_MEM (64u << 10)
#define INFLIGHT_MAX (1u << 20)
#define FILL_MEMORY 0x7fu
#define FDS_MAX 32 /* descriptors the sender keeps per input */

struct sender {
	int mem;
	int fds[FDS_MAX];
	unsigned n;
};

static int keep(struct sender *s, int fd)
{
	if (fd < 0)
		abort();
	if (s->n == FDS_MAX) {
		close(fd);
		return -1;
	}
	s->fds[s->n++] = fd;
	return fd;
}

static void send_msg(int sock, const uint8_t *m, size_t len, const int *fds, unsigned nfds)
{
	struct iovec iov = { (void *)m, len };
	char cbuf[CMSG_SPACE(sizeof(int) * VU_MAX_FDS)];
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	if (nfds) {
		struct cmsghdr *c;

		mh.msg_control = cbuf;
		mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
		memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
	}
	(void)sendmsg(sock, &mh, MSG_NOSIGNAL);
}

/* The descriptors message m (header + len payload bytes) carries, into fds. */
static unsigned msg_fds(struct sender *s, const struct vu_hdr *h, const uint8_t *p, size_t len,
			int *fds)
{
	uint64_t u64 = fuzz_le64(p, len, 0), sz;
	unsigned n = 0;
	int fd;

	switch (h->request) {
	case VU_SET_MEM_TABLE:
		n = len >= 4 ? (unsigned)(p[0] % (VU_MAX_REGIONS + 1)) : 0;
		for (unsigned i = 0; i < n; i++)
			fds[i] = s->mem;
		return n;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		if (u64 & VU_VRING_NOFD)
			return 0;
		fd = keep(s, eventfd(h->request == VU_SET_VRING_KICK, EFD_CLOEXEC | EFD_NONBLOCK));
		if (fd < 0)
			return 0;
		fds[0] = fd;
		return 1;
	case VU_SET_INFLIGHT_FD:
		sz = u64 <= INFLIGHT_MAX ? u64 : 4096;
		fd = keep(s, memfd_create("fuzz-inflight", MFD_CLOEXEC | MFD_ALLOW_SEALING));
		if (fd < 0 || ftruncate(fd, (off_t)sz) < 0 ||
		    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
			return 0;
		fds[0] = fd;
		return 1;
	default:
		return 0;
	}
}

static void send_all(struct fuzz_conn *c)
{
	/* sealed as QEMU's memory-backend-memfd is (lazyblk refuses memory that can shrink) */
	struct sender s = { .mem = memfd_create("fuzz-guest", MFD_CLOEXEC | MFD_ALLOW_SEALING) };
	size_t off = 0;

	if (s.mem < 0 || ftruncate(s.mem, GUEST_MEM) < 0 ||
	    fcntl(s.mem, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) < 0)
		abort();
	while (off < c->size) {
		struct vu_hdr h;
		size_t len;
		int fds[VU_MAX_FDS];
		unsigned nfds;

		if (c->size - off < VU_HDR_SIZE) {
			send_msg(c->cfd, c->data + off, c->size - off, NULL, 0);
			break;
		}
		memcpy(&h, c->data + off, VU_HDR_SIZE);
		len = h.size < c->size - off - VU_HDR_SIZE ? h.size : c->size - off - VU_HDR_SIZE;
		if (h.request == FILL_MEMORY) {
			if (pwrite(s.mem, c->data + off + VU_HDR_SIZE,
				   len < GUEST_MEM ? len : GUEST_MEM, 0) < 0)
				abort();
		} else {
			nfds = msg_fds(&s, &h, c->data + off + VU_HDR_SIZE, len, fds);
			send_msg(c->cfd, c->data + off, VU_HDR_SIZE + len, fds, nfds);
			if (h.request == VU_SET_VRING_KICK && nfds)
				eventfd_write(fds[0], 1);
		}
		off += VU_HDR_SIZE + len;
	}
	for (unsigned i = 0; i < s.n; i++)
		close(s.fds[i]);
	close(s.mem);
}

static void serve(struct fuzz_conn *c)
{
	/* closes the descriptor: fuzz_conn_run's close of sfd then fails harmlessly */
	fuzz_result("vhost_user_conn_run", vhost_user_conn_run(c->arg, dup(c->sfd), NULL), NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct disk d;
	static struct vhost_user_dev *dev;
	struct fuzz_conn c = { .data = data, .size = size, .serve = serve, .send = send_all };

	fuzz_dir();
	if (!dev) {
		fuzz_disk(&d);
		if (vhost_user_dev_new(&d, 2, "fuzz", &dev))
			abort();
	}
	c.arg = dev;
	fuzz_conn_run(&c);
	return 0;
}
