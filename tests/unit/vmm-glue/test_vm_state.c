/* SPDX-License-Identifier: MIT */
/*
 * VM snapshot state (vmm-glue/vm_state.h, serial.h): the record list round-trips (padding
 * to 8, empty records), and taking a record refuses, with one line, the wrong tag or
 * index, a size outside the bounds, a length running past the end, a non-zero reserved
 * word and the end of the buffer; the CPUID record round-trips and one whose entry count
 * does not match its length (or names none) is refused; the UART's state round-trips
 * (registers, FIFO, the interrupt line driven again) and an impossible one is refused.
 */
#include "../helpers.h"
#include <linux/kvm.h>

#include "../../../vmm-glue/serial.h"
#include "../../../vmm-glue/vm_state.h"

static void test_roundtrip(void **state)
{
	struct vm_state_buf b = { 0 };
	struct vm_state_rd r;
	const void *d;
	size_t len;
	char why[200];

	(void)state;
	assert_int_equal(vm_state_put(&b, VMST_REGS, 3, "abcde", 5), 0);
	assert_int_equal(vm_state_put(&b, VMST_END, 0, NULL, 0), 0);
	assert_int_equal(b.len, 16 + 8 + 16);
	r = (struct vm_state_rd){ .p = b.p, .len = b.len };
	assert_int_equal(vm_state_take(&r, VMST_REGS, 3, 5, 5, &d, &len, "regs", why,
				       sizeof(why)), 0);
	assert_int_equal(len, 5);
	assert_memory_equal(d, "abcde", 5);
	assert_int_equal(vm_state_take(&r, VMST_END, 0, 0, 0, &d, &len, "end", why, sizeof(why)),
			 0);
	assert_int_equal(r.off, r.len);
	assert_int_equal(vm_state_take(&r, VMST_END, 0, 0, 0, &d, &len, "end", why, sizeof(why)),
			 -EINVAL);
	assert_non_null(strstr(why, "ends before the end record"));
	free(b.p);
}

static void test_cpuid_record(void **state)
{
	struct kvm_cpuid2 *cp = calloc(1, kvm_cpuid_size(3)), *got;
	struct vm_state_buf b = { 0 };
	struct vm_state_rd r;
	char why[200];

	(void)state;
	assert_non_null(cp);
	cp->nent = 3;
	for (unsigned i = 0; i < 3; i++)
		cp->entries[i] = (struct kvm_cpuid_entry2){ .function = i, .eax = 0x100 + i };
	assert_int_equal(vm_state_cpuid_save(cp, &b, why, sizeof(why)), 0);
	r = (struct vm_state_rd){ .p = b.p, .len = b.len };
	assert_int_equal(vm_state_cpuid_take(&r, &got, why, sizeof(why)), 0);
	assert_int_equal(r.off, r.len);
	assert_memory_equal(got, cp, kvm_cpuid_size(3));
	free(got);
	r = (struct vm_state_rd){ .p = b.p, .len = b.len };   /* checked and passed over */
	assert_int_equal(vm_state_cpuid_take(&r, NULL, why, sizeof(why)), 0);
	assert_int_equal(r.off, r.len);
	/* a count that does not match the record's length: more, fewer, none */
	for (uint32_t n = 0; n < 3; n++) {
		uint32_t bad[] = { 4, 2, 0 };

		memcpy(b.p + 16, &bad[n], sizeof(bad[n]));
		r = (struct vm_state_rd){ .p = b.p, .len = b.len };
		assert_int_equal(vm_state_cpuid_take(&r, &got, why, sizeof(why)), -EINVAL);
		assert_null(got);
		assert_non_null(strstr(why, "CPUID record has"));
	}
	/* shorter than one entry */
	free(b.p);
	b = (struct vm_state_buf){ 0 };
	assert_int_equal(vm_state_put(&b, VMST_KVM_CPUID, 0, cp, 8), 0);
	r = (struct vm_state_rd){ .p = b.p, .len = b.len };
	assert_int_equal(vm_state_cpuid_take(&r, &got, why, sizeof(why)), -EINVAL);
	assert_null(got);
	free(b.p);
	free(cp);
}

static void test_refusals(void **state)
{
	struct vm_state_buf b = { 0 };
	struct vm_state_rd r;
	const void *d;
	size_t len;
	char why[200];
	uint32_t bad;

	(void)state;
	assert_int_equal(vm_state_put(&b, VMST_SREGS, 0, "12345678", 8), 0);
	r = (struct vm_state_rd){ .p = b.p, .len = b.len };
	assert_int_equal(vm_state_take(&r, VMST_REGS, 0, 8, 8, &d, &len, "regs", why,
				       sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "not the regs record"));
	assert_int_equal(vm_state_take(&r, VMST_SREGS, 1, 8, 8, &d, &len, "sregs", why,
				       sizeof(why)), -EINVAL);
	assert_int_equal(vm_state_take(&r, VMST_SREGS, 0, 9, 9, &d, &len, "sregs", why,
				       sizeof(why)), -EINVAL);
	assert_non_null(strstr(why, "has 8 bytes"));
	assert_int_equal(r.off, 0);   /* nothing taken */
	/* a length past the end of the buffer */
	bad = 1u << 20;
	memcpy(b.p + 8, &bad, 4);
	assert_int_equal(vm_state_take(&r, VMST_SREGS, 0, 0, 1u << 21, &d, &len, "sregs", why,
				       sizeof(why)), -EINVAL);
	/* the reserved word */
	bad = 8;
	memcpy(b.p + 8, &bad, 4);
	memcpy(b.p + 12, &bad, 4);
	assert_int_equal(vm_state_take(&r, VMST_SREGS, 0, 8, 8, &d, &len, "sregs", why,
				       sizeof(why)), -EINVAL);
	/* truncated */
	r.len = 20;
	bad = 0;
	memcpy(b.p + 12, &bad, 4);
	assert_int_equal(vm_state_take(&r, VMST_SREGS, 0, 8, 8, &d, &len, "sregs", why,
				       sizeof(why)), -EINVAL);
	free(b.p);
}

static void rec_irq(void *ctx, int level)
{
	*(int *)ctx = level;
}

static void test_serial_state(void **state)
{
	int level = -1;
	struct serial_opts o = { .in_fd = -1, .out_fd = -1, .set_irq = rec_irq, .irq_ctx = &level };
	struct serial *a = NULL, *b = NULL;
	struct serial_state st, st2;
	uint8_t v = 0x01;

	(void)state;
	assert_int_equal(serial_new(&o, &a), 0);
	serial_access(a, 2, &v, true);          /* FIFO on */
	v = 0x01;
	serial_access(a, 1, &v, true);          /* IER: RX data */
	assert_int_equal(serial_receive(a, (const uint8_t *)"hi", 2), 2);
	assert_int_equal(level, 1);
	serial_state_save(a, &st);
	assert_int_equal(st.rx_count, 2);
	serial_free(a);

	level = -1;
	assert_int_equal(serial_new(&o, &b), 0);
	assert_int_equal(serial_state_load(b, &st), 0);
	assert_int_equal(level, 1);             /* the line is driven again */
	serial_access(b, 0, &v, false);
	assert_int_equal(v, 'h');
	serial_state_save(b, &st2);
	assert_int_equal(st2.rx_count, 1);
	st2.ier = 0x10;
	assert_int_equal(serial_state_load(b, &st2), -EINVAL);
	st2.ier = 0;
	st2.rx_head = 16;
	assert_int_equal(serial_state_load(b, &st2), -EINVAL);
	serial_free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_cpuid_record),
		cmocka_unit_test(test_serial_state),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
