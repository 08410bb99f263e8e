/* SPDX-License-Identifier: MIT */
/*
 * A whole static x86-64 ELF executable written in assembly (included by helper_*.S): the
 * ELF header and one PT_LOAD program header (read + execute) mapping the entire file at
 * 0x400000, then the code; no section headers. `objcopy -O binary -j .text` of the object
 * is the file (Makefile). TINY_ELF_BEGIN goes first (the code follows it, entry at the
 * label `_start`), TINY_ELF_END last.
 */
#ifndef LZ_VMM_INITRAMFS_TINY_ELF_H
#define LZ_VMM_INITRAMFS_TINY_ELF_H

#define TINY_ELF_BASE 0x400000

	.macro TINY_ELF_BEGIN
	.text
elf_ehdr:
	.ascii "\177ELF"
	.byte 2, 1, 1                   /* ELFCLASS64, ELFDATA2LSB, EV_CURRENT */
	.fill 9, 1, 0                   /* OS ABI (System V) and padding */
	.short 2                        /* e_type: ET_EXEC */
	.short 62                       /* e_machine: EM_X86_64 */
	.long 1                         /* e_version */
	.quad TINY_ELF_BASE + _start - elf_ehdr   /* e_entry */
	.quad elf_phdr - elf_ehdr       /* e_phoff */
	.quad 0                         /* e_shoff: no section headers */
	.long 0                         /* e_flags */
	.short elf_phdr - elf_ehdr      /* e_ehsize */
	.short elf_code - elf_phdr      /* e_phentsize */
	.short 1                        /* e_phnum */
	.short 0, 0, 0                  /* e_shentsize, e_shnum, e_shstrndx */
elf_phdr:
	.long 1                         /* p_type: PT_LOAD */
	.long 5                         /* p_flags: PF_R | PF_X */
	.quad 0                         /* p_offset */
	.quad TINY_ELF_BASE             /* p_vaddr */
	.quad TINY_ELF_BASE             /* p_paddr */
	.quad elf_end - elf_ehdr        /* p_filesz */
	.quad elf_end - elf_ehdr        /* p_memsz */
	.quad 0x1000                    /* p_align */
elf_code:
	.endm

	.macro TINY_ELF_END
elf_end:
	.endm

#endif
