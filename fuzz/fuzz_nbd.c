/* SPDX-License-Identifier: MIT */
/*
 * The NBD server's side of one connection (blkd/export: nbd_conn_run, the handshake of
 * nbd_handshake.c and the requests of nbd_xmit.c): the input is the byte stream a client
 * sends, from its handshake flags through options (export names, info requests, meta
 * contexts, structured replies) to requests (read, write, trim, write-zeroes, block status,
 * cache, flush, disconnect), against a writable disk in memory that offers everything.
 */
#include "fuzz_disk.h"
#include "fuzz_sockpair.h"
#include "../blkd/transport/nbd_conn.h"

static void serve(struct fuzz_conn *c)
{
	fuzz_result("nbd_conn_run", nbd_conn_run(c->arg, c->sfd, 1, NULL), NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct disk d;
	static struct nbd_offer x;
	struct fuzz_conn c = { .data = data, .size = size, .serve = serve, .arg = &x };

	fuzz_dir();
	if (!d.ops) {
		fuzz_disk(&d);
		x = (struct nbd_offer){ .d = &d, .name = "", .size = d.size };
	}
	fuzz_conn_run(&c);
	return 0;
}
