/* SPDX-License-Identifier: MIT */
/*
 * The initramfs's fixed files, built into lazyblk (internal.h declares them): the guest's
 * scripts as they are in the source tree, and the two helpers as assembled from
 * helper_*.S into tiny ELF files under the build directory. The Makefile assembles this
 * with -Wa,-I<that directory> and makes it depend on every file named here.
 *
 * EMBED sym, file: the bytes of file as the array sym (a NUL follows, not counted) and
 * their count as the size_t sym_len.
 */
	.macro EMBED sym, file
	.section .rodata.lazyblk_initramfs, "a"
	.balign 16
	.globl \sym
	.type \sym, @object
\sym:
	.incbin "\file"
.L\sym\()_end:
	.size \sym, .L\sym\()_end - \sym
	.byte 0
	.balign 8
	.globl \sym\()_len
	.type \sym\()_len, @object
\sym\()_len:
	.quad .L\sym\()_end - \sym
	.size \sym\()_len, 8
	.endm

	EMBED initramfs_init_sh, vmm-glue/initramfs/init.sh
	EMBED initramfs_stage2_sh, vmm-glue/initramfs/stage2.sh
	EMBED initramfs_outb_elf, lazyblk-outb
	EMBED initramfs_exec_elf, lazyblk-exec

	.section .note.GNU-stack, "", @progbits
