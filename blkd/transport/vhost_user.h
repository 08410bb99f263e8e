/* SPDX-License-Identifier: MIT */
/*
 * The vhost-user-blk export: a unix socket a vhost-user master (QEMU's vhost-user-blk-pci,
 * cloud-hypervisor, Firecracker) connects to; it shares the guest's memory (SET_MEM_TABLE)
 * and hands over the virtqueues, which this process then serves with the same virtio-blk
 * request logic as the built-in VMM (virtio_blk.h), one I/O thread per running queue.
 *
 * Offered: VIRTIO_F_VERSION_1, indirect descriptors, event idx, the virtio-blk features of
 * vblk_dev_init() (MQ with several queues), VHOST_USER_F_PROTOCOL_FEATURES; protocol
 * features MQ, REPLY_ACK, CONFIG, RESET_DEVICE, INFLIGHT_SHMFD. One master at a time; when
 * it goes away (or is dropped for a malformed message) the device is reset and the next one
 * is accepted, so a master that reconnects (QEMU's chardev reconnect=N) resumes where the
 * rings are. With INFLIGHT_SHMFD the master keeps a region (GET_INFLIGHT_FD, made here) in
 * which each queue marks the requests it popped and has not completed; a server restarted
 * after a crash is handed it back (SET_INFLIGHT_FD) and resubmits those requests first.
 *
 * The master is trusted as far as the protocol goes, but every message is checked: sizes,
 * file descriptor counts, memory regions (overlaps, mapping sizes against the file),
 * queue indices and ring addresses. A malformed message closes the connection with one log
 * line; a well-formed but refused one gets an error reply (REPLY_ACK) and a log line. The
 * guest is untrusted: a ring outside the shared memory, or a broken chain, stops that queue
 * (one log line, the master's error eventfd signalled) and never touches other memory.
 */
#ifndef LZ_BLKD_VHOST_USER_H
#define LZ_BLKD_VHOST_USER_H

#include <signal.h>

#include "../virtio/virtio_blk.h"
#include "../../common/test_hook.h"

/* queues offered by default: QEMU asks for one per vCPU (num-queues=auto), at most this many */
#define VHOST_USER_QUEUES 16u

struct vhost_user_dev;

/* A device over disk (borrowed); num_queues 1..256 (0: VHOST_USER_QUEUES). -errno. */
int vhost_user_dev_new(const struct disk *disk, unsigned num_queues,
		       const char *serial, struct vhost_user_dev **out);
void vhost_user_dev_free(struct vhost_user_dev *d);
TEST_HOOK
void vhost_user_dev_stats(const struct vhost_user_dev *d, struct vblk_stats *st);

/*
 * Serve one master on the connected socket fd (closed on return) until it disconnects,
 * sends a malformed message, or *stop (may be NULL) becomes non-zero; then every queue is
 * stopped, the memory unmapped and the device reset. Returns 0 when the master left or
 * *stop was set, -EPROTO when the connection was dropped for a protocol error.
 */
TEST_HOOK
int vhost_user_conn_run(struct vhost_user_dev *d, int fd, volatile sig_atomic_t *stop);

/*
 * Listen on the unix socket path and serve masters one after the other until *stop.
 * on_listen (may be NULL) is called once the socket accepts connections. Prints one error
 * line and returns -errno if it cannot listen.
 */
int vhost_user_serve(struct vhost_user_dev *d, const char *path, volatile sig_atomic_t *stop,
		     void (*on_listen)(void *arg), void *arg);

#endif
