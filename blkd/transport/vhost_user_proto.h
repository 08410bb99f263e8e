/* SPDX-License-Identifier: MIT */
/*
 * The vhost-user wire format (QEMU docs/interop/vhost-user.rst), as far as a virtio-blk
 * backend needs it. Every message is a 12-byte header (request, flags, payload size)
 * followed by the payload; file descriptors travel as SCM_RIGHTS with the header.
 * Little-endian host order (x86_64, as the protocol is host-native).
 */
#ifndef LZ_BLKD_VHOST_USER_PROTO_H
#define LZ_BLKD_VHOST_USER_PROTO_H

#include <stdint.h>

enum vhost_user_request {
	VU_GET_FEATURES = 1,
	VU_SET_FEATURES = 2,
	VU_SET_OWNER = 3,
	VU_RESET_OWNER = 4,
	VU_SET_MEM_TABLE = 5,
	VU_SET_LOG_BASE = 6,
	VU_SET_LOG_FD = 7,
	VU_SET_VRING_NUM = 8,
	VU_SET_VRING_ADDR = 9,
	VU_SET_VRING_BASE = 10,
	VU_GET_VRING_BASE = 11,
	VU_SET_VRING_KICK = 12,
	VU_SET_VRING_CALL = 13,
	VU_SET_VRING_ERR = 14,
	VU_GET_PROTOCOL_FEATURES = 15,
	VU_SET_PROTOCOL_FEATURES = 16,
	VU_GET_QUEUE_NUM = 17,
	VU_SET_VRING_ENABLE = 18,
	VU_GET_CONFIG = 24,
	VU_SET_CONFIG = 25,
	VU_GET_INFLIGHT_FD = 31,
	VU_SET_INFLIGHT_FD = 32,
	VU_RESET_DEVICE = 34,
	VU_REQUEST_MAX = 64,
};

/* header flags */
#define VU_FLAG_VERSION_MASK 0x3u
#define VU_VERSION 0x1u
#define VU_FLAG_REPLY (1u << 2)
#define VU_FLAG_NEED_REPLY (1u << 3)

/* VHOST_USER_F_PROTOCOL_FEATURES: a virtio feature bit the protocol borrows */
#define VU_F_PROTOCOL_FEATURES 30

/* protocol feature bits */
#define VU_PF_MQ 0
#define VU_PF_REPLY_ACK 3
#define VU_PF_CONFIG 9
#define VU_PF_INFLIGHT_SHMFD 12
#define VU_PF_RESET_DEVICE 13

/* SET_VRING_KICK/CALL/ERR: the queue index and a "no file descriptor" flag */
#define VU_VRING_IDX_MASK 0xffu
#define VU_VRING_NOFD (1u << 8)

#define VU_MAX_REGIONS 8u       /* VHOST_MEMORY_BASELINE_NREGIONS */
#define VU_MAX_FDS 8u
#define VU_CONFIG_MAX 256u      /* VHOST_USER_MAX_CONFIG_SIZE */
#define VU_HDR_SIZE 12u
#define VU_PAYLOAD_MAX (VU_CONFIG_HDR_SIZE + VU_CONFIG_MAX)

struct vu_hdr {
	uint32_t request;
	uint32_t flags;
	uint32_t size;
} __attribute__((packed));

struct vu_region {
	uint64_t gpa;            /* guest_phys_addr */
	uint64_t size;           /* memory_size */
	uint64_t uva;            /* userspace_addr: where the master mapped it */
	uint64_t mmap_offset;
};

struct vu_mem_table {
	uint32_t nregions;
	uint32_t padding;
	struct vu_region r[VU_MAX_REGIONS];
};
#define VU_MEM_HDR_SIZE 8u

struct vu_vring_state {
	uint32_t index;
	uint32_t num;
};

struct vu_vring_addr {
	uint32_t index;
	uint32_t flags;          /* bit 0: log (not offered) */
	uint64_t desc;           /* master user addresses, not guest-physical */
	uint64_t used;
	uint64_t avail;
	uint64_t log;
};

struct vu_config {
	uint32_t offset;
	uint32_t size;
	uint32_t flags;
	uint8_t data[VU_CONFIG_MAX];
};
#define VU_CONFIG_HDR_SIZE 12u

struct vu_inflight {
	uint64_t mmap_size;
	uint64_t mmap_offset;
	uint16_t num_queues;
	uint16_t queue_size;
	uint32_t padding;
};

/* A message as held here: the payload aligned (on the wire it follows the header). */
struct vu_msg {
	struct vu_hdr hdr;
	uint32_t align;
	union {
		uint64_t u64;
		struct vu_vring_state state;
		struct vu_vring_addr addr;
		struct vu_mem_table mem;
		struct vu_config config;
		struct vu_inflight inflight;
		uint8_t raw[VU_PAYLOAD_MAX];
	} p;
};

_Static_assert(sizeof(struct vu_hdr) == VU_HDR_SIZE, "vhost-user header");
_Static_assert(sizeof(struct vu_vring_addr) == 40, "vring addr");
_Static_assert(sizeof(struct vu_inflight) == 24, "inflight");
_Static_assert(sizeof(struct vu_mem_table) == VU_MEM_HDR_SIZE + 32 * VU_MAX_REGIONS, "mem");

#endif
