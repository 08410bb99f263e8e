/* SPDX-License-Identifier: MIT */
/*
 * /bin/lazyblk-outb of the initramfs: reads 3 bytes from stdin (port, little-endian u16;
 * value) and does ioperm(port, 1, 1); outb(value, port). Exit 0, or 1 if the read or
 * ioperm failed. /init reports the boot timer (port 0x440) and the exit status (0x441)
 * with it: Debian's kernels have no /dev/port. Position-independent, no stack frame.
 */
#include "tiny_elf.h"

	TINY_ELF_BEGIN
_start:
	sub $16, %rsp
	xor %edi, %edi                  /* read(0, rsp, 3) */
	mov %rsp, %rsi
	mov $3, %edx
	xor %eax, %eax
	syscall
	cmp $3, %rax
	jne 1f
	movzwl (%rsp), %edi             /* ioperm(port, 1, 1) */
	mov $1, %esi
	mov $1, %edx
	mov $173, %eax
	syscall
	test %rax, %rax
	jnz 1f
	movzwl (%rsp), %edx
	movb 2(%rsp), %al
	outb %al, (%dx)
	xor %edi, %edi
	jmp 2f
1:	mov $1, %edi
2:	mov $60, %eax                   /* exit */
	syscall
	TINY_ELF_END
