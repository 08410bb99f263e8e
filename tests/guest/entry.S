/* SPDX-License-Identifier: MIT */
/*
 * Entry points of the test guest.
 *  start64:     the Linux 64-bit boot protocol: long mode, identity paging of 0-4 GiB set up
 *               by the VMM, interrupts off, %rsi = boot_params.  (ELF e_entry)
 *  pvh_start32: PVH (XEN_ELFNOTE_PHYS32_ENTRY): 32-bit flat protected mode, paging off,
 *               %ebx = hvm_start_info.  Loads our GDT and page tables, enables long mode and
 *               joins the 64-bit path.  (QEMU -M microvm -kernel uses this one.)
 * Both write a byte to port 0x440 (the boot timer) first.
 */
#define PORT_TIMER 0x440

	.section .text.entry, "ax"
	.code64
	.globl start64
start64:
	movw $PORT_TIMER, %dx
	movb $1, %al
	outb %al, %dx
	cli
	cld
	leaq stack_top(%rip), %rsp
	movq %rsi, %rdi            /* boot_params */
	xorl %esi, %esi            /* not PVH */
	jmp common64

	.code32
	.globl pvh_start32
pvh_start32:
	movw $PORT_TIMER, %dx
	movb $1, %al
	outb %al, %dx
	cli
	cld
	movl %ebx, %edi            /* hvm_start_info */
	lgdt gdt_desc
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	movl %cr4, %eax
	orl $0x20, %eax            /* PAE */
	movl %eax, %cr4
	movl $pml4, %eax
	movl %eax, %cr3
	movl $0xc0000080, %ecx     /* EFER.LME */
	rdmsr
	orl $0x100, %eax
	wrmsr
	movl %cr0, %eax
	orl $0x80000001, %eax      /* PG | PE */
	movl %eax, %cr0
	ljmp $0x08, $pvh64

	.code64
pvh64:
	movl $0x10, %eax
	movl %eax, %ds
	movl %eax, %es
	movl %eax, %ss
	xorl %eax, %eax
	movl %eax, %fs
	movl %eax, %gs
	leaq stack_top(%rip), %rsp
	movl %edi, %edi            /* zero-extend hvm_start_info */
	movl $1, %esi              /* PVH */
	jmp common64

common64:
	call guest_main
1:	cli
	hlt
	jmp 1b

/* exception stubs: push an error code if the CPU did not, then the vector */
	.macro exc vec
	.p2align 4
exc_\vec:
	.if (\vec != 8) && (\vec != 10) && (\vec != 11) && (\vec != 12) && (\vec != 13) && (\vec != 14) && (\vec != 17) && (\vec != 21) && (\vec != 29) && (\vec != 30)
	pushq $0
	.endif
	pushq $\vec
	jmp exc_common
	.endm

	.globl exc_base
exc_base:
	exc 0
	exc 1
	exc 2
	exc 3
	exc 4
	exc 5
	exc 6
	exc 7
	exc 8
	exc 9
	exc 10
	exc 11
	exc 12
	exc 13
	exc 14
	exc 15
	exc 16
	exc 17
	exc 18
	exc 19
	exc 20
	exc 21
	exc 22
	exc 23
	exc 24
	exc 25
	exc 26
	exc 27
	exc 28
	exc 29
	exc 30
	exc 31

exc_common:
	movq %rsp, %rdi            /* [vector, error, rip, cs, rflags, rsp, ss] */
	andq $-16, %rsp
	call guest_exception
2:	cli
	hlt
	jmp 2b


/* GDT for the PVH path: null, 64-bit code (0x08), data (0x10) */
	.section .rodata
	.p2align 3
gdt:
	.quad 0
	.quad 0x00af9a000000ffff
	.quad 0x00cf92000000ffff
gdt_end:
gdt_desc:
	.word gdt_end - gdt - 1
	.long gdt

/* identity map of 0-4 GiB in 2 MiB pages, for the PVH path (the 64-bit path keeps the VMM's) */
	.section .data
	.p2align 12
pml4:
	.quad pdpt + 0x3
	.fill 511, 8, 0
pdpt:
	.quad pd + 0x3, pd + 0x1003, pd + 0x2003, pd + 0x3003
	.fill 508, 8, 0
pd:
	.set i, 0
	.rept 2048
	.quad (i << 21) | 0x83
	.set i, i + 1
	.endr

/* the stack */
	.section .bss
	.p2align 4
	.globl stack_top
stack:
	.fill 65536, 1, 0
stack_top:

/* PVH entry note (the descriptor is 8 bytes in an ELF64, as Linux and QEMU have it) */
	.section .note.Xen, "a", @note
	.p2align 2
	.long 4, 8, 18             /* namesz, descsz, XEN_ELFNOTE_PHYS32_ENTRY */
	.asciz "Xen"
	.quad pvh_start32

	.section .note.GNU-stack, "", @progbits
