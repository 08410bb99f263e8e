/* SPDX-License-Identifier: MIT */
/*
 * NBD wire constants (the protocol's doc/proto.md, newstyle fixed handshake with
 * structured replies and metadata contexts). Every field on the wire is in network byte
 * order; messages are built and parsed field by field with be16_get() .. be64_put()
 * (common/le.h, included here for every user), never by casting packed structs over buffers.
 */
#ifndef LZ_BLKD_NBD_PROTO_H
#define LZ_BLKD_NBD_PROTO_H

#include <stdint.h>

#include "../../common/le.h"

/* handshake */
#define NBD_MAGIC               0x4e42444d41474943ull   /* "NBDMAGIC" */
#define NBD_OPTS_MAGIC          0x49484156454f5054ull   /* "IHAVEOPT" */
#define NBD_REP_MAGIC           0x0003e889045565a9ull

#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)   /* handshake flags (16 bits, server) */
#define NBD_FLAG_NO_ZEROES      (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE (1u << 0) /* client flags (32 bits) */
#define NBD_FLAG_C_NO_ZEROES    (1u << 1)

/* transmission flags (16 bits) */
#define NBD_FLAG_HAS_FLAGS      (1u << 0)
#define NBD_FLAG_READ_ONLY      (1u << 1)
#define NBD_FLAG_SEND_FLUSH     (1u << 2)
#define NBD_FLAG_SEND_FUA       (1u << 3)
#define NBD_FLAG_ROTATIONAL     (1u << 4)
#define NBD_FLAG_SEND_TRIM      (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)
#define NBD_FLAG_SEND_DF        (1u << 7)
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)

/* options */
#define NBD_OPT_EXPORT_NAME     1u
#define NBD_OPT_ABORT           2u
#define NBD_OPT_LIST            3u
#define NBD_OPT_STARTTLS        5u
#define NBD_OPT_INFO            6u
#define NBD_OPT_GO              7u
#define NBD_OPT_STRUCTURED_REPLY 8u
#define NBD_OPT_LIST_META_CONTEXT 9u
#define NBD_OPT_SET_META_CONTEXT 10u

/* option replies */
#define NBD_REP_ACK             1u
#define NBD_REP_SERVER          2u
#define NBD_REP_INFO            3u
#define NBD_REP_META_CONTEXT    4u
#define NBD_REP_ERR_BIT         0x80000000u
#define NBD_REP_ERR_UNSUP       (NBD_REP_ERR_BIT | 1u)
#define NBD_REP_ERR_POLICY      (NBD_REP_ERR_BIT | 2u)
#define NBD_REP_ERR_INVALID     (NBD_REP_ERR_BIT | 3u)
#define NBD_REP_ERR_PLATFORM    (NBD_REP_ERR_BIT | 4u)
#define NBD_REP_ERR_TLS_REQD    (NBD_REP_ERR_BIT | 5u)
#define NBD_REP_ERR_UNKNOWN     (NBD_REP_ERR_BIT | 6u)
#define NBD_REP_ERR_SHUTDOWN    (NBD_REP_ERR_BIT | 7u)
#define NBD_REP_ERR_BLOCK_SIZE_REQD (NBD_REP_ERR_BIT | 8u)
#define NBD_REP_ERR_TOO_BIG     (NBD_REP_ERR_BIT | 9u)

/* NBD_REP_INFO types */
#define NBD_INFO_EXPORT         0u
#define NBD_INFO_NAME           1u
#define NBD_INFO_DESCRIPTION    2u
#define NBD_INFO_BLOCK_SIZE     3u

/* transmission */
#define NBD_REQUEST_MAGIC       0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC  0x67446698u
#define NBD_STRUCTURED_REPLY_MAGIC 0x668e33efu

#define NBD_REQUEST_SIZE        28u   /* magic 4, flags 2, type 2, handle 8, offset 8, length 4 */
#define NBD_SIMPLE_REPLY_SIZE   16u   /* magic 4, error 4, handle 8 */
#define NBD_CHUNK_HDR_SIZE      20u   /* magic 4, flags 2, type 2, handle 8, length 4 */

#define NBD_CMD_READ            0u
#define NBD_CMD_WRITE           1u
#define NBD_CMD_DISC            2u
#define NBD_CMD_FLUSH           3u
#define NBD_CMD_TRIM            4u
#define NBD_CMD_CACHE           5u
#define NBD_CMD_WRITE_ZEROES    6u
#define NBD_CMD_BLOCK_STATUS    7u

#define NBD_CMD_FLAG_FUA        (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE    (1u << 1)
#define NBD_CMD_FLAG_DF         (1u << 2)
#define NBD_CMD_FLAG_REQ_ONE    (1u << 3)
#define NBD_CMD_FLAG_FAST_ZERO  (1u << 4)

#define NBD_REPLY_FLAG_DONE     (1u << 0)

#define NBD_REPLY_TYPE_NONE     0u
#define NBD_REPLY_TYPE_OFFSET_DATA 1u
#define NBD_REPLY_TYPE_OFFSET_HOLE 2u
#define NBD_REPLY_TYPE_BLOCK_STATUS 5u
#define NBD_REPLY_TYPE_ERROR    ((1u << 15) | 1u)
#define NBD_REPLY_TYPE_ERROR_OFFSET ((1u << 15) | 2u)

/* error values on the wire (not the host's errno numbers, although most coincide) */
#define NBD_EPERM               1u
#define NBD_EIO                 5u
#define NBD_ENOMEM              12u
#define NBD_EINVAL              22u
#define NBD_ENOSPC              28u
#define NBD_EOVERFLOW           75u
#define NBD_ENOTSUP             95u
#define NBD_ESHUTDOWN           108u

/* base:allocation flags */
#define NBD_STATE_HOLE          (1u << 0)
#define NBD_STATE_ZERO          (1u << 1)

#endif
