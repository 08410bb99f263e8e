/* SPDX-License-Identifier: MIT */
/* blkd/virtio/vring: the device side of split virtqueues against hostile drivers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../blkd/virtio/vring.h"
#include "../virtq_guest.h"

static struct vring_chain chain;

static void setup_q(struct tguest *g, struct vring_queue *vq, unsigned num, bool indirect,
		    bool event_idx)
{
	if (g->ram)
		tg_free(g);
	tg_init(g, num);
	assert_int_equal(vring_setup(vq, &g->mem, num, g->desc, g->avail, g->used, indirect,
				     event_idx), 0);
}

static void test_setup_checks(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;

	(void)state;
	tg_init(&g, 8);
	assert_int_equal(vring_setup(&vq, &g.mem, 0, g.desc, g.avail, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 6, g.desc, g.avail, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 65536, g.desc, g.avail, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc + 8, g.avail, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc, g.avail + 1, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc, g.avail, g.used + 2, 0, 0), -EINVAL);
	/* outside memory, or running off its end (the event fields included) */
	assert_int_equal(vring_setup(&vq, &g.mem, 8, 0x1000, g.avail, g.used, 0, 0), -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc, TG_GPA + TG_SIZE - 20, g.used, 0, 0),
			 -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc, g.avail, TG_GPA + TG_SIZE - 68, 0, 0),
			 -EINVAL);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, g.desc, g.avail, TG_GPA + TG_SIZE - 72, 0, 0),
			 0);
	assert_int_equal(vring_setup(&vq, &g.mem, 8, UINT64_MAX - 15, g.avail, g.used, 0, 0),
			 -EINVAL);
	tg_free(&g);
}

static void test_pop_push(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a = 0, b = 0;
	uint32_t id, len;

	(void)state;
	setup_q(&g, &vq, 8, false, false);
	assert_int_equal(vring_pop(&vq, &chain), 0);
	assert_false(vring_pending(&vq));
	a = tg_alloc(&g, 100, 8);
	b = tg_alloc(&g, 300, 8);
	struct tg_buf bufs[] = { { a, 100, false }, { b, 300, true } };
	uint16_t head = tg_chain(&g, bufs, 2);

	tg_submit(&g, head);
	assert_true(vring_pending(&vq));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_int_equal(chain.head, head);
	assert_false(chain.bad);
	assert_int_equal(chain.nseg, 2);
	assert_int_equal(chain.nrd, 1);
	assert_ptr_equal(chain.seg[0].p, tg_ptr(&g, a));
	assert_int_equal(chain.seg[0].len, 100);
	assert_false(chain.seg[0].wr);
	assert_ptr_equal(chain.seg[1].p, tg_ptr(&g, b));
	assert_true(chain.seg[1].wr);
	assert_int_equal(chain.rd_len, 100);
	assert_int_equal(chain.wr_len, 300);
	assert_int_equal(vring_pop(&vq, &chain), 0);
	vring_push(&vq, head, 300);
	assert_true(tg_get_used(&g, &id, &len));
	assert_int_equal(id, head);
	assert_int_equal(len, 300);
	assert_false(tg_get_used(&g, &id, &len));
	/* the ring wraps: 40 requests through 8 entries */
	for (int i = 0; i < 40; i++) {
		tg_submit(&g, tg_chain(&g, bufs, 2));
		assert_int_equal(vring_pop(&vq, &chain), 1);
		vring_push(&vq, chain.head, 1);
		assert_true(tg_get_used(&g, &id, &len));
		assert_int_equal(id, chain.head);
	}
	tg_free(&g);
}

static void test_loops_and_indexes(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	setup_q(&g, &vq, 8, false, false);
	a = tg_alloc(&g, 64, 8);
	/* 0 -> 1 -> 0 */
	tg_set_desc(tg_desc(&g, 0), a, 16, VIRTQ_DESC_F_NEXT, 1);
	tg_set_desc(tg_desc(&g, 1), a, 16, VIRTQ_DESC_F_NEXT, 0);
	tg_submit(&g, 0);
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	assert_int_equal(vq.last_avail_idx, 0);   /* not consumed */
	/* a self-loop of zero-length descriptors */
	setup_q(&g, &vq, 8, false, false);
	tg_set_desc(tg_desc(&g, 3), 0, 0, VIRTQ_DESC_F_NEXT, 3);
	tg_submit(&g, 3);
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	/* next out of the table */
	setup_q(&g, &vq, 8, false, false);
	tg_set_desc(tg_desc(&g, 0), a, 16, VIRTQ_DESC_F_NEXT, 8);
	tg_submit(&g, 0);
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	/* head out of the table */
	setup_q(&g, &vq, 8, false, false);
	tg_submit(&g, 9);
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	/* avail->idx moved by more than the ring size */
	setup_q(&g, &vq, 8, false, false);
	tg_set_desc(tg_desc(&g, 0), a, 16, 0, 0);
	tg_avail(&g)->idx = 9;
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	tg_avail(&g)->idx = 8;   /* exactly full is fine */
	for (int i = 0; i < 8; i++)
		assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_int_equal(vring_pop(&vq, &chain), 0);
	tg_avail(&g)->idx = (uint16_t)(8 - 1);   /* backwards: a jump of 65535 */
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	/* a full-length chain of the whole table is fine, no longer */
	setup_q(&g, &vq, 8, false, false);
	for (int i = 0; i < 8; i++)
		tg_set_desc(tg_desc(&g, (unsigned)i), a, 8, i < 7 ? VIRTQ_DESC_F_NEXT : 0,
			    (uint16_t)(i + 1));
	tg_submit(&g, 0);
	assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_int_equal(chain.nseg, 8);
	tg_free(&g);
}

static void test_too_long(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	/* a legal (< queue size) chain longer than VRING_CHAIN_MAX is refused, not overrun */
	setup_q(&g, &vq, 2048, false, false);
	a = tg_alloc(&g, 64, 8);
	for (unsigned i = 0; i < VRING_CHAIN_MAX + 1; i++)
		tg_set_desc(tg_desc(&g, i), a, 8, i < VRING_CHAIN_MAX ? VIRTQ_DESC_F_NEXT : 0,
			    (uint16_t)(i + 1));
	tg_submit(&g, 0);
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	tg_free(&g);
}

static void test_bad_addresses(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	setup_q(&g, &vq, 8, false, false);
	a = tg_alloc(&g, 64, 8);
	/* outside, straddling the end, wrapping around 2^64, 4 GiB readable */
	struct tg_buf cases[][2] = {
		{ { 0x1000, 16, false }, { a, 1, true } },
		{ { TG_GPA + TG_SIZE - 8, 16, false }, { a, 1, true } },
		{ { UINT64_MAX - 7, 16, false }, { a, 1, true } },
		{ { a, 16, false }, { UINT64_MAX, 1, true } },
		{ { a, 0xffffffffu, false }, { a, 1, true } },
	};
	for (unsigned i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		tg_submit(&g, tg_chain(&g, cases[i], 2));
		assert_int_equal(vring_pop(&vq, &chain), 1);
		assert_true(chain.bad);
		assert_int_equal(chain.nseg, 2);
		assert_true(!chain.seg[0].p || !chain.seg[1].p);
	}
	/* zero-length descriptors are skipped, whatever their address */
	struct tg_buf z[] = { { a, 16, false }, { 0xdead0000, 0, false }, { a, 0, true },
			      { a + 16, 1, true } };
	tg_submit(&g, tg_chain(&g, z, 4));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_false(chain.bad);
	assert_int_equal(chain.nseg, 2);
	assert_int_equal(chain.nrd, 1);
	assert_int_equal(chain.rd_len, 16);
	assert_int_equal(chain.wr_len, 1);
	tg_free(&g);
}

static void test_order(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	setup_q(&g, &vq, 8, false, false);
	a = tg_alloc(&g, 64, 8);
	struct tg_buf b[] = { { a, 16, false }, { a, 16, true }, { a, 16, false } };
	tg_submit(&g, tg_chain(&g, b, 3));
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	/* even when the readable one after is empty */
	setup_q(&g, &vq, 8, false, false);
	struct tg_buf c[] = { { a, 16, true }, { a, 0, false } };
	tg_submit(&g, tg_chain(&g, c, 2));
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	tg_free(&g);
}

static void test_indirect(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a, t;
	struct virtq_desc *tab;

	(void)state;
	setup_q(&g, &vq, 8, true, false);
	a = tg_alloc(&g, 4096, 8);
	struct tg_buf b[] = { { a, 16, false }, { a + 16, 512, true }, { a + 528, 1, true } };
	tg_submit(&g, tg_chain_indirect(&g, b, 3));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_false(chain.bad);
	assert_int_equal(chain.nseg, 3);
	assert_int_equal(chain.nrd, 1);
	assert_int_equal(chain.wr_len, 513);
	assert_ptr_equal(chain.seg[2].p, tg_ptr(&g, a + 528));

	/* direct descriptors followed by one indirect (2.7.5.3.2) */
	t = tg_alloc(&g, 32, 16);
	tab = tg_ptr(&g, t);
	tg_set_desc(&tab[0], a + 16, 512, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	tg_set_desc(&tab[1], a + 528, 1, VIRTQ_DESC_F_WRITE, 0);
	tg_set_desc(tg_desc(&g, 5), a, 16, VIRTQ_DESC_F_NEXT, 6);
	tg_set_desc(tg_desc(&g, 6), t, 32, VIRTQ_DESC_F_INDIRECT, 0);
	tg_submit(&g, 5);
	assert_int_equal(vring_pop(&vq, &chain), 1);
	assert_int_equal(chain.nseg, 3);
	assert_int_equal(chain.nrd, 1);

	/* the bad ones: each breaks the queue */
	struct {
		uint64_t addr;
		uint32_t len;
		uint16_t flags;
		uint16_t tab1_flags, tab1_next;
	} bad[] = {
		/* addr 0: the table */
		{ 0, 32, VIRTQ_DESC_F_INDIRECT | VIRTQ_DESC_F_NEXT, 0, 0 },   /* with NEXT */
		{ 0, 0, VIRTQ_DESC_F_INDIRECT, 0, 0 },                         /* empty */
		{ 0, 24, VIRTQ_DESC_F_INDIRECT, 0, 0 },                        /* not 16k */
		{ 0x1000, 32, VIRTQ_DESC_F_INDIRECT, 0, 0 },                   /* outside */
		{ 0, 32, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_INDIRECT, 0 },    /* nested */
		{ 0, 32, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1 }, /* loop */
		{ 0, 32, VIRTQ_DESC_F_INDIRECT, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 2 }, /* next */
		{ 0, 16u * (VRING_CHAIN_MAX + 1), VIRTQ_DESC_F_INDIRECT, 0, 0 }, /* huge */
	};
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		setup_q(&g, &vq, 8, true, false);
		a = tg_alloc(&g, 4096, 8);
		t = tg_alloc(&g, 16u * (VRING_CHAIN_MAX + 1), 16);
		tab = tg_ptr(&g, t);
		tg_set_desc(&tab[0], a, 16, VIRTQ_DESC_F_NEXT, 1);
		tg_set_desc(&tab[1], a + 16, 1, VIRTQ_DESC_F_WRITE, 0);
		if (bad[i].tab1_flags) {
			tg_set_desc(&tab[1], bad[i].tab1_flags & VIRTQ_DESC_F_INDIRECT ? t : a + 16,
				    bad[i].tab1_flags & VIRTQ_DESC_F_INDIRECT ? 32 : 1,
				    bad[i].tab1_flags, bad[i].tab1_next);
		}
		tg_set_desc(tg_desc(&g, 0), bad[i].addr ? bad[i].addr : t, bad[i].len,
			    bad[i].flags, 1);
		tg_set_desc(tg_desc(&g, 1), a + 32, 1, VIRTQ_DESC_F_WRITE, 0);
		tg_submit(&g, 0);
		assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	}
	/* not negotiated */
	setup_q(&g, &vq, 8, false, false);
	a = tg_alloc(&g, 4096, 8);
	tg_submit(&g, tg_chain_indirect(&g, b, 3));
	assert_int_equal(vring_pop(&vq, &chain), -EPROTO);
	tg_free(&g);
}

static void test_event_math(void **state)
{
	(void)state;
	/* used_event in [old, new): that entry was among those just published */
	assert_true(vring_event_needed(5, 6, 5));
	assert_false(vring_event_needed(6, 6, 6));
	assert_true(vring_event_needed(10, 12, 8));
	assert_false(vring_event_needed(7, 12, 8));
	assert_true(vring_event_needed(8, 12, 7));
	assert_false(vring_event_needed(13, 12, 8));
	/* across 65535 -> 0 */
	assert_true(vring_event_needed(65535, 1, 65534));
	assert_true(vring_event_needed(0, 1, 65534));
	assert_true(vring_event_needed(65534, 1, 65534));
	assert_false(vring_event_needed(1, 1, 65534));
	assert_false(vring_event_needed(2, 1, 65534));
}

static void test_notify_event_idx(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	setup_q(&g, &vq, 8, false, true);
	a = tg_alloc(&g, 64, 8);
	struct tg_buf b[] = { { a, 16, false }, { a + 16, 1, true } };

	/* first completion always notifies; nothing new: no notification */
	tg_submit(&g, tg_chain(&g, b, 2));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	vring_push(&vq, chain.head, 1);
	assert_true(vring_need_notify(&vq));
	assert_false(vring_need_notify(&vq));
	/* the driver asks to be told after used idx passes 3 */
	*tg_used_event(&g) = 3;
	for (int i = 0; i < 2; i++) {
		tg_submit(&g, tg_chain(&g, b, 2));
		assert_int_equal(vring_pop(&vq, &chain), 1);
		vring_push(&vq, chain.head, 1);
		assert_false(vring_need_notify(&vq));   /* used idx 2, 3 */
	}
	tg_submit(&g, tg_chain(&g, b, 2));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	vring_push(&vq, chain.head, 1);
	assert_true(vring_need_notify(&vq));        /* 4 passes event 3 */
	/* a batch of two jumping over the event */
	*tg_used_event(&g) = 4;
	for (int i = 0; i < 2; i++) {
		tg_submit(&g, tg_chain(&g, b, 2));
		assert_int_equal(vring_pop(&vq, &chain), 1);
		vring_push(&vq, chain.head, 1);
	}
	assert_true(vring_need_notify(&vq));
	/* the avail flag does not matter with event idx */
	tg_avail(&g)->flags = VIRTQ_AVAIL_F_NO_INTERRUPT;
	*tg_used_event(&g) = 6;
	tg_submit(&g, tg_chain(&g, b, 2));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	vring_push(&vq, chain.head, 1);
	assert_true(vring_need_notify(&vq));

	/* kick suppression: avail_event follows last_avail_idx */
	vring_disable_notify(&vq);
	assert_int_equal(tg_used(&g)->flags, 0);
	assert_false(vring_enable_notify(&vq));
	assert_int_equal(*tg_avail_event(&g), vq.last_avail_idx);
	tg_submit(&g, tg_chain(&g, b, 2));
	assert_true(vring_enable_notify(&vq));       /* arrived meanwhile: pop again */

	/* wraparound of the 16-bit indexes */
	setup_q(&g, &vq, 8, false, true);
	a = tg_alloc(&g, 64, 8);
	b[0].gpa = a;
	b[1].gpa = a + 16;
	vq.last_avail_idx = vq.used_idx = 65534;
	vq.signalled_used = 65534;
	vq.signalled_used_valid = true;
	g.avail_idx = g.last_used = 65534;
	tg_used(&g)->idx = 65534;
	*tg_used_event(&g) = 65535;
	for (int i = 0; i < 3; i++) {
		tg_submit(&g, tg_chain(&g, b, 2));
		assert_int_equal(vring_pop(&vq, &chain), 1);
		vring_push(&vq, chain.head, 1);
	}
	assert_int_equal(vq.used_idx, 1);
	assert_true(vring_need_notify(&vq));
	tg_free(&g);
}

static void test_notify_flags(void **state)
{
	struct tguest g = {0};
	struct vring_queue vq;
	uint64_t a;

	(void)state;
	setup_q(&g, &vq, 8, false, false);
	a = tg_alloc(&g, 64, 8);
	struct tg_buf b[] = { { a, 16, false }, { a + 16, 1, true } };

	tg_submit(&g, tg_chain(&g, b, 2));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	vring_push(&vq, chain.head, 1);
	assert_true(vring_need_notify(&vq));
	assert_false(vring_need_notify(&vq));        /* nothing pushed since */
	tg_avail(&g)->flags = VIRTQ_AVAIL_F_NO_INTERRUPT;
	tg_submit(&g, tg_chain(&g, b, 2));
	assert_int_equal(vring_pop(&vq, &chain), 1);
	vring_push(&vq, chain.head, 1);
	assert_false(vring_need_notify(&vq));
	/* kick suppression through used->flags */
	vring_disable_notify(&vq);
	assert_int_equal(tg_used(&g)->flags, VIRTQ_USED_F_NO_NOTIFY);
	assert_false(vring_enable_notify(&vq));
	assert_int_equal(tg_used(&g)->flags, 0);
	tg_free(&g);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_setup_checks),
		cmocka_unit_test(test_pop_push),
		cmocka_unit_test(test_loops_and_indexes),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_bad_addresses),
		cmocka_unit_test(test_order),
		cmocka_unit_test(test_indirect),
		cmocka_unit_test(test_event_math),
		cmocka_unit_test(test_notify_event_idx),
		cmocka_unit_test(test_notify_flags),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
