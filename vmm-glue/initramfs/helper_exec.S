/* SPDX-License-Identifier: MIT */
/*
 * /bin/lazyblk-exec of the initramfs: lazyblk-exec UID GID PATH ARGV0 [ARGS...] does
 * setgroups(0, NULL), setgid(GID), setuid(UID), execve(PATH, [ARGV0, ARGS...], envp).
 * Exit 126 on bad arguments or a failed set*id, 127 if execve fails. UID/GID: decimal, at
 * most 4294967294. Stage 2 runs the command through it (an image needs no shell or su).
 */
#include "tiny_elf.h"

	TINY_ELF_BEGIN
_start:
	mov (%rsp), %rcx                /* argc */
	cmp $5, %rcx
	jb fail
	mov 16(%rsp), %rdi              /* argv[1]: UID */
	call atou
	mov %rax, %r12
	mov 24(%rsp), %rdi              /* argv[2]: GID */
	call atou
	mov %rax, %r13
	xor %edi, %edi                  /* setgroups(0, NULL) */
	xor %esi, %esi
	mov $116, %eax
	syscall
	test %rax, %rax
	jnz fail
	mov %r13, %rdi                  /* setgid */
	mov $106, %eax
	syscall
	test %rax, %rax
	jnz fail
	mov %r12, %rdi                  /* setuid */
	mov $105, %eax
	syscall
	test %rax, %rax
	jnz fail
	mov (%rsp), %rcx                /* execve(argv[3], &argv[4], envp) */
	mov 32(%rsp), %rdi
	lea 40(%rsp), %rsi
	lea 16(%rsp,%rcx,8), %rdx
	mov $59, %eax
	syscall
	mov $127, %edi
	jmp out
fail:	mov $126, %edi
out:	mov $60, %eax                   /* exit */
	syscall

/* atou: the decimal string at rdi as a number in rax (at most 0xfffffffe), else to fail */
atou:	xor %eax, %eax
	cmpb $0, (%rdi)
	je bad
2:	movzbl (%rdi), %ecx
	test %ecx, %ecx
	jz 3f
	sub $48, %ecx
	cmp $9, %ecx
	ja bad
	imul $10, %rax, %rax
	add %rcx, %rax
	mov $0xfffffffe, %edx
	cmp %rdx, %rax
	ja bad
	inc %rdi
	jmp 2b
3:	ret
bad:	add $8, %rsp                    /* drop the return address */
	jmp fail
	TINY_ELF_END
