/* SPDX-License-Identifier: MIT */
/*
 * blkd/transport/vhost_user_msg: receiving, checking and answering vhost-user messages.
 *
 * A message is checked before it is handled: the header's version, a known request, the
 * payload size that request has, and the number of file descriptors it carries. Anything
 * else is malformed (-EPROTO: the connection is dropped). A well-formed request that is
 * refused (an unknown queue, overlapping memory regions, a ring outside the memory, ...)
 * gets a failure in its REPLY_ACK reply when the master asked for one, and a log line.
 */
#include "vhost_user_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../common/clock.h"
#include "../../common/log.h"

#define BIT(n) (1ull << (n))
#define VU_PROTOCOL_FEATURES                                                               \
	(BIT(VU_PF_MQ) | BIT(VU_PF_REPLY_ACK) | BIT(VU_PF_CONFIG) | BIT(VU_PF_RESET_DEVICE) |   \
	 BIT(VU_PF_INFLIGHT_SHMFD))

static const char *const req_names[VU_REQUEST_MAX] = {
	[VU_GET_FEATURES] = "GET_FEATURES",
	[VU_SET_FEATURES] = "SET_FEATURES",
	[VU_SET_OWNER] = "SET_OWNER",
	[VU_RESET_OWNER] = "RESET_OWNER",
	[VU_SET_MEM_TABLE] = "SET_MEM_TABLE",
	[VU_SET_VRING_NUM] = "SET_VRING_NUM",
	[VU_SET_VRING_ADDR] = "SET_VRING_ADDR",
	[VU_SET_VRING_BASE] = "SET_VRING_BASE",
	[VU_GET_VRING_BASE] = "GET_VRING_BASE",
	[VU_SET_VRING_KICK] = "SET_VRING_KICK",
	[VU_SET_VRING_CALL] = "SET_VRING_CALL",
	[VU_SET_VRING_ERR] = "SET_VRING_ERR",
	[VU_GET_PROTOCOL_FEATURES] = "GET_PROTOCOL_FEATURES",
	[VU_SET_PROTOCOL_FEATURES] = "SET_PROTOCOL_FEATURES",
	[VU_GET_QUEUE_NUM] = "GET_QUEUE_NUM",
	[VU_SET_VRING_ENABLE] = "SET_VRING_ENABLE",
	[VU_GET_CONFIG] = "GET_CONFIG",
	[VU_SET_CONFIG] = "SET_CONFIG",
	[VU_GET_INFLIGHT_FD] = "GET_INFLIGHT_FD",
	[VU_SET_INFLIGHT_FD] = "SET_INFLIGHT_FD",
	[VU_RESET_DEVICE] = "RESET_DEVICE",
};

static const char *req_name(uint32_t r)
{
	return r < VU_REQUEST_MAX && req_names[r] ? req_names[r] : NULL;
}

/* ---- receiving ---------------------------------------------------------------------- */

/* Keep the fds of one control message; more than VU_MAX_FDS in all are closed (*extra). */
static void take_fds(struct msghdr *mh, int *fds, unsigned *nfds, bool *extra)
{
	for (struct cmsghdr *c = CMSG_FIRSTHDR(mh); c; c = CMSG_NXTHDR(mh, c)) {
		size_t n;
		int *p;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		p = (int *)CMSG_DATA(c);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, p + i, sizeof(fd));
			if (*nfds < VU_MAX_FDS) {
				fds[(*nfds)++] = fd;
			} else {
				close(fd);
				*extra = true;
			}
		}
	}
	if (mh->msg_flags & MSG_CTRUNC)
		*extra = true;
}

/* Exactly len bytes (fds collected on the way). 0, or -ECONNRESET at once at EOF, -EPROTO. */
static int recv_all(int fd, void *buf, size_t len, int *fds, unsigned *nfds, bool *extra)
{
	union {
		char buf[CMSG_SPACE(sizeof(int) * (VU_MAX_FDS + 1))];
		struct cmsghdr align;
	} cm;
	size_t got = 0;

	while (got < len) {
		struct iovec iov = { .iov_base = (char *)buf + got, .iov_len = len - got };
		struct msghdr mh = {
			.msg_iov = &iov, .msg_iovlen = 1,
			.msg_control = cm.buf, .msg_controllen = sizeof(cm.buf),
		};
		ssize_t n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN ? -ETIMEDOUT : -errno;
		take_fds(&mh, fds, nfds, extra);
		if (n == 0)
			return got ? -EPROTO : -ECONNRESET;
		got += (size_t)n;
	}
	return 0;
}

int vu_msg_recv(int fd, struct vu_msg *m, int *fds, unsigned *nfds, char *why, size_t why_len)
{
	bool extra = false;
	int ret;

	*nfds = 0;
	if (why_len)
		why[0] = '\0';
	ret = recv_all(fd, &m->hdr, VU_HDR_SIZE, fds, nfds, &extra);
	if (ret == -ECONNRESET)
		return 0;
	if (ret == -EPROTO)
		return why_set(why, why_len, ret, "short header");
	if (ret == -ETIMEDOUT)
		return why_set(why, why_len, -EPROTO, "incomplete message");
	if (ret < 0)
		return ret;
	if ((m->hdr.flags & VU_FLAG_VERSION_MASK) != VU_VERSION)
		return why_set(why, why_len, -EPROTO, "bad version in header flags");
	if (m->hdr.size > VU_PAYLOAD_MAX)
		return why_set(why, why_len, -EPROTO, "payload too large");
	ret = recv_all(fd, &m->p, m->hdr.size, fds, nfds, &extra);
	if (ret == -ECONNRESET || ret == -EPROTO)
		return why_set(why, why_len, -EPROTO, "short payload");
	if (ret == -ETIMEDOUT)
		return why_set(why, why_len, -EPROTO, "incomplete message");
	if (ret < 0)
		return ret;
	if (extra)
		return why_set(why, why_len, -EPROTO, "too many file descriptors");
	return 1;
}

/* ---- checking ----------------------------------------------------------------------- */

/* NULL when the message has the size and fds its request needs, else why not. */
static const char *msg_check(const struct vu_msg *m, unsigned nfds)
{
	uint32_t size = m->hdr.size, want_size = 0;
	unsigned want_fds = 0;

	switch (m->hdr.request) {
	case VU_GET_FEATURES:
	case VU_SET_OWNER:
	case VU_RESET_OWNER:
	case VU_GET_PROTOCOL_FEATURES:
	case VU_GET_QUEUE_NUM:
	case VU_RESET_DEVICE:
		/* no payload (some masters send a u64 anyway) */
		if (size && size != 8)
			return "bad payload size";
		want_size = size;
		break;
	case VU_SET_FEATURES:
	case VU_SET_PROTOCOL_FEATURES:
		want_size = 8;
		break;
	case VU_SET_VRING_NUM:
	case VU_SET_VRING_BASE:
	case VU_GET_VRING_BASE:
	case VU_SET_VRING_ENABLE:
		want_size = sizeof(struct vu_vring_state);
		break;
	case VU_SET_VRING_ADDR:
		want_size = sizeof(struct vu_vring_addr);
		break;
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		want_size = 8;
		if (size == 8)
			want_fds = (m->p.u64 & VU_VRING_NOFD) ? 0 : 1;
		break;
	case VU_SET_MEM_TABLE:
		if (size < VU_MEM_HDR_SIZE)
			return "bad payload size";
		if (!m->p.mem.nregions || m->p.mem.nregions > VU_MAX_REGIONS)
			return "bad number of memory regions";
		want_size = VU_MEM_HDR_SIZE + m->p.mem.nregions * (uint32_t)sizeof(struct vu_region);
		want_fds = m->p.mem.nregions;
		break;
	case VU_GET_INFLIGHT_FD:
		want_size = sizeof(struct vu_inflight);
		break;
	case VU_SET_INFLIGHT_FD:
		want_size = sizeof(struct vu_inflight);
		want_fds = 1;
		break;
	case VU_GET_CONFIG:
	case VU_SET_CONFIG:
		if (size < VU_CONFIG_HDR_SIZE || m->p.config.size > VU_CONFIG_MAX)
			return "bad payload size";
		want_size = VU_CONFIG_HDR_SIZE + m->p.config.size;
		break;
	default:
		return "unknown or unsupported request";
	}
	if (size != want_size)
		return "bad payload size";
	if (nfds < want_fds)
		return "file descriptor missing";
	if (nfds > want_fds)
		return "unexpected file descriptors";
	return NULL;
}

/* ---- answering ---------------------------------------------------------------------- */

/*
 * Send buf on fd, fd (-1: none) as SCM_RIGHTS with its first byte, without blocking: when
 * the socket is full, wait for the master to read, but no longer than VU_REPLY_TIMEOUT_MS
 * (-ETIMEDOUT) and not once the server is stopping (-ECANCELED). A master that never reads
 * its replies must not hold the connection thread, and with it SIGTERM, forever.
 */
static int send_bounded(struct vhost_user_dev *d, int fd, const uint8_t *buf, size_t len,
			int sendfd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { .iov_base = (void *)buf, .iov_len = len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	struct timespec t0;
	size_t done = 0;

	if (sendfd >= 0) {
		struct cmsghdr *c;

		mh.msg_control = cm.buf;
		mh.msg_controllen = sizeof(cm.buf);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &sendfd, sizeof(int));
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (done < len) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		ssize_t n;

		iov.iov_base = (void *)(buf + done);
		iov.iov_len = len - done;
		n = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n > 0) {
			done += (size_t)n;
			mh.msg_control = NULL;   /* the fd went with the first byte */
			mh.msg_controllen = 0;
			continue;
		}
		if (n < 0 && errno != EINTR && errno != EAGAIN)
			return -errno;
		if (stopped(d->stop))
			return -ECANCELED;
		if (clock_ms_since(&t0) >= VU_REPLY_TIMEOUT_MS)
			return -ETIMEDOUT;
		poll(&p, 1, VU_POLL_MS);
	}
	return 0;
}

/* The reply to m: size bytes of its payload, and sendfd (-1: none) as SCM_RIGHTS. */
static int reply_send(struct vhost_user_dev *d, int fd, struct vu_msg *m, uint32_t size,
		      int sendfd)
{
	struct vu_hdr h = { .request = m->hdr.request, .flags = VU_VERSION | VU_FLAG_REPLY,
			    .size = size };
	uint8_t buf[VU_HDR_SIZE + VU_PAYLOAD_MAX];

	memcpy(buf, &h, VU_HDR_SIZE);
	memcpy(buf + VU_HDR_SIZE, &m->p, size);
	return send_bounded(d, fd, buf, VU_HDR_SIZE + size, sendfd);
}

static int reply_u64(struct vhost_user_dev *d, int fd, struct vu_msg *m, uint64_t v)
{
	m->p.u64 = v;
	return reply_send(d, fd, m, 8, -1);
}

/* A reply that could not be sent: the connection is dropped (-EPROTO), or ends (stopping). */
static int reply_failed(uint32_t r, int ret)
{
	if (ret == -ECANCELED)
		return ret;
	if (ret == -ETIMEDOUT)
		log_warn("vhost-user: %s: the master has not read its replies for %d s; "
			 "dropping the connection", req_name(r), VU_REPLY_TIMEOUT_MS / 1000);
	return -EPROTO;
}

/* ---- handlers: 0 or a reply size > 0 to send; -errno refused (logged here) ----------- */

static struct vu_queue *queue_of(struct vhost_user_dev *d, uint32_t idx, const char *req)
{
	if (idx < d->nq)
		return &d->q[idx];
	log_warn("vhost-user: %s: no queue %u (%u queues)", req, idx, d->nq);
	return NULL;
}

static uint64_t features_offered(const struct vhost_user_dev *d)
{
	return d->blk.features | BIT(VU_F_PROTOCOL_FEATURES);
}

static int h_set_features(struct vhost_user_dev *d, struct vu_msg *m)
{
	uint64_t f = m->p.u64, virtio = f & ~BIT(VU_F_PROTOCOL_FEATURES);

	if (f & ~features_offered(d)) {
		log_warn("vhost-user: SET_FEATURES: 0x%llx not offered",
			 (unsigned long long)(f & ~features_offered(d)));
		return -EINVAL;
	}
	if (vblk_dev_ack_features(&d->blk, virtio) < 0) {
		log_warn("vhost-user: SET_FEATURES: without VIRTIO_F_VERSION_1");
		return -EINVAL;
	}
	d->features = f;
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_update(&d->q[i]);   /* without protocol features, rings are enabled */
	return 0;
}

static int h_set_protocol_features(struct vhost_user_dev *d, struct vu_msg *m)
{
	if (m->p.u64 & ~VU_PROTOCOL_FEATURES) {
		log_warn("vhost-user: SET_PROTOCOL_FEATURES: 0x%llx not offered",
			 (unsigned long long)(m->p.u64 & ~VU_PROTOCOL_FEATURES));
		return -EINVAL;
	}
	d->pfeatures = m->p.u64;
	return 0;
}

static int h_vring_num(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_queue *q = queue_of(d, m->p.state.index, "SET_VRING_NUM");
	unsigned num = m->p.state.num;

	if (!q)
		return -EINVAL;
	if (!num || num > VRING_MAX_SIZE || (num & (num - 1))) {
		log_warn("vhost-user: SET_VRING_NUM: bad size %u for queue %u", num, q->idx);
		return -EINVAL;
	}
	vu_queue_stop(q);   /* the master should have stopped it */
	q->num = num;
	return vu_queue_update(q);
}

static int h_vring_addr(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_vring_addr *a = &m->p.addr;
	struct vu_queue *q = queue_of(d, a->index, "SET_VRING_ADDR");
	uint64_t gpa;

	if (!q)
		return -EINVAL;
	vu_queue_stop(q);
	/* checked now when the memory is known (else when the ring starts) */
	if (d->mem.n && q->num &&
	    (vu_uva_to_gpa(d, a->desc, 16ull * q->num, &gpa) ||
	     vu_uva_to_gpa(d, a->avail, 6 + 2ull * q->num, &gpa) ||
	     vu_uva_to_gpa(d, a->used, 6 + 8ull * q->num, &gpa))) {
		log_warn("vhost-user: SET_VRING_ADDR: queue %u: ring outside the shared memory",
			 q->idx);
		q->has_addr = false;
		return -EFAULT;
	}
	q->addr = *a;
	q->has_addr = true;
	q->broken = false;   /* set up again: served again */
	return vu_queue_update(q);
}

static int h_vring_base(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_queue *q = queue_of(d, m->p.state.index, "SET_VRING_BASE");

	if (!q)
		return -EINVAL;
	if (m->p.state.num > 0xffff) {
		log_warn("vhost-user: SET_VRING_BASE: queue %u: bad index %u", q->idx,
			 m->p.state.num);
		return -EINVAL;
	}
	vu_queue_stop(q);
	q->base = (uint16_t)m->p.state.num;
	return vu_queue_update(q);
}

/* GET_VRING_BASE stops the ring and says where it stopped. */
static int h_get_vring_base(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_queue *q = queue_of(d, m->p.state.index, "GET_VRING_BASE");

	if (!q)
		return -EINVAL;
	vu_queue_stop(q);
	q->kicked = false;
	vu_queue_set_fd(q, &q->kick_fd, -1);
	m->p.state.num = q->base;
	return sizeof(m->p.state);
}

static int h_vring_fd(struct vhost_user_dev *d, struct vu_msg *m, int *fds)
{
	uint32_t r = m->hdr.request;
	struct vu_queue *q = queue_of(d, (uint32_t)(m->p.u64 & VU_VRING_IDX_MASK), req_name(r));
	bool nofd = m->p.u64 & VU_VRING_NOFD;
	int fd = nofd ? -1 : fds[0];

	if (!q || (m->p.u64 & ~(uint64_t)(VU_VRING_IDX_MASK | VU_VRING_NOFD))) {
		if (q)
			log_warn("vhost-user: %s: bad flags", req_name(r));
		return -EINVAL;
	}
	if (r == VU_SET_VRING_KICK && nofd) {
		log_warn("vhost-user: SET_VRING_KICK: queue %u: polling mode not supported", q->idx);
		return -EOPNOTSUPP;
	}
	if (!nofd) {
		fds[0] = -1;   /* ours now */
		/*
		 * Non-blocking, whatever the master made them: it holds the other end, and could
		 * empty a kick eventfd between our poll and read, or fill a call eventfd's counter,
		 * and either would block the queue's thread, and with it the stop. (QEMU makes its
		 * eventfds non-blocking already; the flag is on the file they share.)
		 */
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	}
	if (r == VU_SET_VRING_KICK) {
		vu_queue_stop(q);
		vu_queue_set_fd(q, &q->kick_fd, fd);
		q->kicked = true;
		return vu_queue_update(q);
	}
	vu_queue_set_fd(q, r == VU_SET_VRING_CALL ? &q->call_fd : &q->err_fd, fd);
	return 0;
}

static int h_vring_enable(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_queue *q = queue_of(d, m->p.state.index, "SET_VRING_ENABLE");

	if (!q)
		return -EINVAL;
	if (m->p.state.num > 1) {
		log_warn("vhost-user: SET_VRING_ENABLE: bad value %u", m->p.state.num);
		return -EINVAL;
	}
	q->enabled = m->p.state.num;
	return vu_queue_update(q);
}

static int h_get_config(struct vhost_user_dev *d, struct vu_msg *m)
{
	struct vu_config *c = &m->p.config;

	vblk_config_read(&d->blk, c->offset, c->data, c->size);
	return (int)(VU_CONFIG_HDR_SIZE + c->size);
}

/*
 * GET_INFLIGHT_FD: refused, the reply says "no region" (mmap_size 0, no fd), which QEMU
 * takes as a backend without in-flight tracking.
 */
static int h_get_inflight(struct vhost_user_dev *d, struct vu_msg *m, int *reply_fd)
{
	if (vu_inflight_get(d, &m->p.inflight, reply_fd) < 0) {
		m->p.inflight.mmap_size = 0;
		m->p.inflight.mmap_offset = 0;
	}
	return sizeof(m->p.inflight);
}

void vu_dev_reset(struct vhost_user_dev *d)
{
	for (unsigned i = 0; i < d->nq; i++)
		vu_queue_reset(&d->q[i]);
	vu_mem_unmap(d);
	vu_inflight_unmap(d);
	d->features = d->pfeatures = 0;
	d->blk.acked = 0;
}

/* 0 or a reply size (with *reply_fd, or -1), or -errno (refused). */
static int dispatch(struct vhost_user_dev *d, struct vu_msg *m, int *fds, int *reply_fd)
{
	switch (m->hdr.request) {
	case VU_GET_FEATURES:
		m->p.u64 = features_offered(d);
		return 8;
	case VU_SET_FEATURES:
		return h_set_features(d, m);
	case VU_GET_PROTOCOL_FEATURES:
		m->p.u64 = VU_PROTOCOL_FEATURES;
		return 8;
	case VU_SET_PROTOCOL_FEATURES:
		return h_set_protocol_features(d, m);
	case VU_SET_OWNER:
		return 0;
	case VU_RESET_OWNER:
	case VU_RESET_DEVICE:
		vu_dev_reset(d);
		return 0;
	case VU_GET_QUEUE_NUM:
		m->p.u64 = d->nq;
		return 8;
	case VU_SET_MEM_TABLE:
		return vu_mem_set(d, &m->p.mem, fds);
	case VU_SET_VRING_NUM:
		return h_vring_num(d, m);
	case VU_SET_VRING_ADDR:
		return h_vring_addr(d, m);
	case VU_SET_VRING_BASE:
		return h_vring_base(d, m);
	case VU_GET_VRING_BASE:
		return h_get_vring_base(d, m);
	case VU_SET_VRING_KICK:
	case VU_SET_VRING_CALL:
	case VU_SET_VRING_ERR:
		return h_vring_fd(d, m, fds);
	case VU_SET_VRING_ENABLE:
		return h_vring_enable(d, m);
	case VU_GET_CONFIG:
		return h_get_config(d, m);
	case VU_SET_CONFIG:
		return 0;   /* nothing is writable (no VIRTIO_BLK_F_CONFIG_WCE): ignored */
	case VU_GET_INFLIGHT_FD:
		return h_get_inflight(d, m, reply_fd);
	case VU_SET_INFLIGHT_FD:
		return vu_inflight_set(d, &m->p.inflight, fds[0]);
	}
	return -ENOSYS;   /* not reached: msg_check() knows the same requests */
}

static bool has_reply(uint32_t r)
{
	return r == VU_GET_FEATURES || r == VU_GET_PROTOCOL_FEATURES || r == VU_GET_QUEUE_NUM ||
	       r == VU_GET_VRING_BASE || r == VU_GET_CONFIG || r == VU_GET_INFLIGHT_FD;
}

int vu_msg_handle(struct vhost_user_dev *d, int fd, struct vu_msg *m, int *fds, unsigned nfds)
{
	const char *why = msg_check(m, nfds);
	uint32_t r = m->hdr.request;
	int ret, reply_fd = -1;

	if (why) {
		const char *name = req_name(r);

		if (name)
			log_warn("vhost-user: %s: %s; dropping the connection", name, why);
		else
			log_warn("vhost-user: request %u: %s; dropping the connection", r, why);
		return -EPROTO;
	}
	log_debug("vhost-user: %s (size %u, %u fds%s)", req_name(r), m->hdr.size, nfds,
		  m->hdr.flags & VU_FLAG_NEED_REPLY ? ", reply wanted" : "");
	ret = dispatch(d, m, fds, &reply_fd);
	if (has_reply(r)) {
		if (ret < 0) {
			/* a reply the master waits for cannot say "failed": drop it */
			log_warn("vhost-user: %s failed; dropping the connection", req_name(r));
			return -EPROTO;
		}
		ret = reply_send(d, fd, m, (uint32_t)ret, reply_fd);
		if (reply_fd >= 0)
			close(reply_fd);   /* the master has its own now; the mapping stays */
		return ret < 0 ? reply_failed(r, ret) : 0;
	}
	if (m->hdr.flags & VU_FLAG_NEED_REPLY) {
		ret = reply_u64(d, fd, m, ret < 0 ? 1 : 0);
		return ret < 0 ? reply_failed(r, ret) : 0;
	}
	return 0;
}
