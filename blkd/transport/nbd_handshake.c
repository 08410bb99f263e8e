/* SPDX-License-Identifier: MIT */
/*
 * The NBD handshake: newstyle fixed negotiation. The server speaks first (magic, the
 * handshake flags), the client answers with its flags, then sends options until one of
 * them (NBD_OPT_GO or NBD_OPT_EXPORT_NAME) starts the transmission phase. Every option
 * is read whole (bounded by NBD_MAX_OPTION) and parsed with explicit bounds checks; an
 * option that is not understood or malformed gets an error reply and the negotiation
 * goes on, as the protocol asks.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/log.h"
#include "nbd_conn.h"
#include "nbd_proto.h"

enum opt_result { OPT_NEXT, OPT_ABORT, OPT_GO };

static const char *export_name(const struct nbd_session *s)
{
	return s->x->name ? s->x->name : "";
}

/* The empty name is the default export; with no name configured, any name is ours. */
static bool name_ok(const struct nbd_session *s, const uint8_t *name, uint32_t len)
{
	const char *ours = export_name(s);

	return len == 0 || !*ours || (len == strlen(ours) && !memcmp(name, ours, len));
}

/* A client string for a log line: at most 64 bytes, non-printable bytes as '?'. */
static const char *printable(const uint8_t *p, uint32_t len, char out[72])
{
	uint32_t n = len < 64 ? len : 64, i;

	for (i = 0; i < n; i++)
		out[i] = p[i] >= 0x20 && p[i] < 0x7f ? (char)p[i] : '?';
	strcpy(out + i, len > n ? "..." : "");
	return out;
}

/* Transmission flags for this session. */
static uint16_t nbd_tflags(const struct nbd_session *s)
{
	const struct disk *d = s->x->d;
	uint16_t f = NBD_FLAG_HAS_FLAGS;

	if (d->can_flush)
		f |= NBD_FLAG_SEND_FLUSH;
	if (d->can_fua || d->can_flush) /* disk_write() flushes after a write without FUA */
		f |= NBD_FLAG_SEND_FUA;
	if (d->can_multi_conn)
		f |= NBD_FLAG_CAN_MULTI_CONN;
	if (s->x->read_only)
		f |= NBD_FLAG_READ_ONLY;
	if (!s->x->read_only && d->can_discard)
		f |= NBD_FLAG_SEND_TRIM;
	if (!s->x->read_only && d->can_write_zeroes)
		f |= NBD_FLAG_SEND_WRITE_ZEROES;
	if (s->structured)
		f |= NBD_FLAG_SEND_DF; /* a read is always one data chunk */
	return f;
}

/* One option reply: magic, option, type, length, then the two data pieces. */
static int opt_reply2(struct nbd_session *s, uint32_t opt, uint32_t type, const void *a,
		      size_t alen, const void *b, size_t blen)
{
	uint8_t hdr[20];
	struct iovec iov[3] = { { hdr, sizeof(hdr) }, { (void *)a, alen }, { (void *)b, blen } };

	be64_put(hdr, NBD_REP_MAGIC);
	be32_put(hdr + 8, opt);
	be32_put(hdr + 12, type);
	be32_put(hdr + 16, (uint32_t)(alen + blen));
	return nbd_sendv(s->fd, iov, 3);
}

static int opt_reply(struct nbd_session *s, uint32_t opt, uint32_t type, const void *data,
		     size_t len)
{
	return opt_reply2(s, opt, type, data, len, NULL, 0);
}

/* An error reply whose data is a message for a human. */
static int opt_error(struct nbd_session *s, uint32_t opt, uint32_t type, const char *msg)
{
	return opt_reply(s, opt, type, msg, strlen(msg));
}

static int opt_export_name(struct nbd_session *s, const uint8_t *data, uint32_t len)
{
	uint8_t reply[8 + 2 + 124] = { 0 };
	char shown[72];
	int ret;

	if (!name_ok(s, data, len)) {
		/* the protocol gives this option no way to fail but to hang up */
		log_warn("nbd: client %u: no export named '%s', disconnecting", s->id,
			 printable(data, len, shown));
		return -ENOENT;
	}
	be64_put(reply, s->x->size);
	be16_put(reply + 8, nbd_tflags(s));
	ret = nbd_send(s->fd, reply, s->no_zeroes ? 10 : sizeof(reply));
	return ret ? ret : OPT_GO;
}

static int send_info(struct nbd_session *s, uint32_t opt, uint16_t type, const void *data,
		     size_t len)
{
	uint8_t t[2];

	be16_put(t, type);
	return opt_reply2(s, opt, NBD_REP_INFO, t, 2, data, len);
}

/*
 * NBD_OPT_INFO / NBD_OPT_GO: u32 name length, name, u16 count, count u16 info requests.
 * The export's size and flags and its block sizes are always sent; its name and a
 * description when asked for.
 */
static int opt_info(struct nbd_session *s, uint32_t opt, const uint8_t *data, uint32_t len)
{
	uint8_t exp[10], bs[12];
	bool want_name = false, want_desc = false;
	uint32_t nlen, nreq, p;
	const char *name = export_name(s), *desc = s->x->d->description;
	int ret;

	if (len < 6 || (nlen = be32_get(data)) > len - 6)
		return opt_error(s, opt, NBD_REP_ERR_INVALID, "malformed request");
	p = 4 + nlen;
	nreq = be16_get(data + p);
	p += 2;
	if (len - p != 2 * nreq)
		return opt_error(s, opt, NBD_REP_ERR_INVALID, "malformed information list");
	for (uint32_t i = 0; i < nreq; i++) {
		uint16_t t = be16_get(data + p + 2 * i);

		want_name |= t == NBD_INFO_NAME;
		want_desc |= t == NBD_INFO_DESCRIPTION;
	}
	if (!name_ok(s, data + 4, nlen))
		return opt_error(s, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	be64_put(exp, s->x->size);
	be16_put(exp + 8, nbd_tflags(s));
	be32_put(bs, BLKD_SECTOR);
	be32_put(bs + 4, DISK_BLOCK);
	be32_put(bs + 8, NBD_MAX_PAYLOAD);
	ret = send_info(s, opt, NBD_INFO_EXPORT, exp, sizeof(exp));
	if (!ret)
		ret = send_info(s, opt, NBD_INFO_BLOCK_SIZE, bs, sizeof(bs));
	if (!ret && want_name)
		ret = send_info(s, opt, NBD_INFO_NAME, name, strlen(name));
	if (!ret && want_desc && desc)
		ret = send_info(s, opt, NBD_INFO_DESCRIPTION, desc, strlen(desc));
	if (!ret)
		ret = opt_reply(s, opt, NBD_REP_ACK, NULL, 0);
	if (ret)
		return ret;
	return opt == NBD_OPT_GO ? OPT_GO : OPT_NEXT;
}

static int opt_list(struct nbd_session *s, uint32_t len)
{
	const char *name = export_name(s);
	uint8_t nlen[4];
	int ret;

	if (len)
		return opt_error(s, NBD_OPT_LIST, NBD_REP_ERR_INVALID,
				 "NBD_OPT_LIST takes no data");
	be32_put(nlen, (uint32_t)strlen(name));
	ret = opt_reply2(s, NBD_OPT_LIST, NBD_REP_SERVER, nlen, 4, name, strlen(name));
	return ret ? ret : opt_reply(s, NBD_OPT_LIST, NBD_REP_ACK, NULL, 0);
}

/*
 * Which of the export's contexts a query names. Listing accepts the namespaces "base:"
 * and "lazyblk:" as wildcards; selecting takes full names only. Unknown names, and
 * contexts the disk does not know, are ignored.
 */
static void ctx_match(const struct nbd_offer *x, const uint8_t *q, uint32_t len, bool list,
		      bool sel[NBD_CTX_COUNT])
{
	for (int c = 0; c < NBD_CTX_COUNT; c++) {
		const char *name = nbd_ctx_name(c), *colon = strchr(name, ':');
		size_t ns = (size_t)(colon - name) + 1;

		if (!nbd_ctx_offered(x, c))
			continue;

		if (len == strlen(name) && !memcmp(q, name, len))
			sel[c] = true;
		else if (list && len == ns && !memcmp(q, name, ns))
			sel[c] = true;
	}
}

/*
 * NBD_OPT_LIST_META_CONTEXT / NBD_OPT_SET_META_CONTEXT: u32 name length, name,
 * u32 count, count × (u32 length, query). Setting replaces the selection even when the
 * request fails.
 */
static int opt_meta(struct nbd_session *s, uint32_t opt, const uint8_t *data, uint32_t len)
{
	bool list = opt == NBD_OPT_LIST_META_CONTEXT, sel[NBD_CTX_COUNT] = { false };
	uint32_t nlen, nq, p;
	int ret;

	if (!list)
		memset(s->ctx, 0, sizeof(s->ctx));
	if (!s->structured)
		return opt_error(s, opt, NBD_REP_ERR_INVALID,
				 "negotiate structured replies first");
	if (len < 8 || (nlen = be32_get(data)) > len - 8)
		return opt_error(s, opt, NBD_REP_ERR_INVALID, "malformed request");
	p = 4 + nlen;
	nq = be32_get(data + p);
	p += 4;
	for (uint32_t i = 0; i < nq; i++) {
		uint32_t qlen;

		if (len - p < 4 || (qlen = be32_get(data + p)) > len - p - 4)
			return opt_error(s, opt, NBD_REP_ERR_INVALID, "malformed query list");
		ctx_match(s->x, data + p + 4, qlen, list, sel);
		p += 4 + qlen;
	}
	if (p != len)
		return opt_error(s, opt, NBD_REP_ERR_INVALID, "trailing bytes after the queries");
	if (!name_ok(s, data + 4, nlen))
		return opt_error(s, opt, NBD_REP_ERR_UNKNOWN, "no such export");
	if (list && nq == 0)
		for (int c = 0; c < NBD_CTX_COUNT; c++)
			sel[c] = nbd_ctx_offered(s->x, c);
	for (int c = 0; c < NBD_CTX_COUNT; c++) {
		const char *name = nbd_ctx_name(c);
		uint8_t id[4];

		if (!sel[c])
			continue;
		be32_put(id, list ? 0 : (uint32_t)c + 1);
		ret = opt_reply2(s, opt, NBD_REP_META_CONTEXT, id, 4, name, strlen(name));
		if (ret)
			return ret;
	}
	if (!list)
		memcpy(s->ctx, sel, sizeof(sel));
	return opt_reply(s, opt, NBD_REP_ACK, NULL, 0);
}

static int handle_option(struct nbd_session *s, uint32_t opt, const uint8_t *data,
			 uint32_t len)
{
	char msg[64];

	switch (opt) {
	case NBD_OPT_EXPORT_NAME:
		return opt_export_name(s, data, len);
	case NBD_OPT_ABORT:
		opt_reply(s, opt, NBD_REP_ACK, NULL, 0); /* the client may be gone already */
		return OPT_ABORT;
	case NBD_OPT_LIST:
		return opt_list(s, len);
	case NBD_OPT_INFO:
	case NBD_OPT_GO:
		return opt_info(s, opt, data, len);
	case NBD_OPT_STRUCTURED_REPLY:
		if (len)
			return opt_error(s, opt, NBD_REP_ERR_INVALID,
					 "NBD_OPT_STRUCTURED_REPLY takes no data");
		s->structured = true;
		return opt_reply(s, opt, NBD_REP_ACK, NULL, 0);
	case NBD_OPT_LIST_META_CONTEXT:
	case NBD_OPT_SET_META_CONTEXT:
		return opt_meta(s, opt, data, len);
	default:
		snprintf(msg, sizeof(msg), "option %u is not supported", opt);
		return opt_error(s, opt, NBD_REP_ERR_UNSUP, msg);
	}
}

int nbd_handshake(struct nbd_session *s)
{
	uint8_t hello[18], cf[4], hdr[16], *data;
	uint32_t flags, opt, len;
	int ret;

	be64_put(hello, NBD_MAGIC);
	be64_put(hello + 8, NBD_OPTS_MAGIC);
	be16_put(hello + 16, NBD_FLAG_FIXED_NEWSTYLE | NBD_FLAG_NO_ZEROES);
	ret = nbd_send(s->fd, hello, sizeof(hello));
	if (ret == -EPIPE || ret == -ECONNRESET)
		return 1; /* connected and left at once: a probe */
	if (!ret)
		ret = nbd_recv(s->fd, cf, sizeof(cf));
	if (ret == -ENODATA)
		return 1;
	if (ret)
		goto io_error;
	flags = be32_get(cf);
	if (flags & ~(NBD_FLAG_C_FIXED_NEWSTYLE | NBD_FLAG_C_NO_ZEROES)) {
		log_warn("nbd: client %u: unknown client flags 0x%x, disconnecting", s->id, flags);
		return -EPROTO;
	}
	s->no_zeroes = flags & NBD_FLAG_C_NO_ZEROES;
	for (;;) {
		ret = nbd_recv(s->fd, hdr, sizeof(hdr));
		if (ret == -ENODATA)
			return 1;
		if (ret)
			goto io_error;
		if (be64_get(hdr) != NBD_OPTS_MAGIC) {
			log_warn("nbd: client %u: bad option magic, disconnecting", s->id);
			return -EPROTO;
		}
		opt = be32_get(hdr + 8);
		len = be32_get(hdr + 12);
		if (len > NBD_MAX_OPTION) {
			log_warn("nbd: client %u: option %u with %u bytes of data, disconnecting",
				 s->id, opt, len);
			return -EPROTO;
		}
		data = malloc(len ? len : 1);
		if (!data)
			return -ENOMEM;
		ret = nbd_recv(s->fd, data, len);
		if (!ret)
			ret = handle_option(s, opt, data, len);
		free(data);
		if (ret == -ENODATA)
			ret = -ECONNRESET;
		if (ret < 0 && ret != -ENOENT && ret != -EPROTO)
			goto io_error;
		if (ret < 0)
			return ret;
		if (ret == OPT_ABORT)
			return 1;
		if (ret == OPT_GO)
			return 0;
	}
io_error:
	if (!nbd_cut(s)) /* else the watchdog said why */
		log_warn("nbd: client %u: %s during the handshake, disconnecting", s->id,
			 ret == -ECONNRESET ? "truncated message" : strerror(-ret));
	return ret;
}
