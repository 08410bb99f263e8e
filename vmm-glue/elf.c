/* SPDX-License-Identifier: MIT */
/*
 * vmlinux (or any x86-64 ELF executable): PT_LOAD segments at their physical addresses,
 * the 64-bit entry, and the PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY).
 * Guest RAM is a fresh memfd, so the bytes past p_filesz (bss) are already 0.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "boot.h"

#define XEN_ELFNOTE_PHYS32_ENTRY 18

bool elf_is_elf(const uint8_t *buf, size_t len)
{
	return len >= SELFMAG && !memcmp(buf, ELFMAG, SELFMAG);
}

bool elf_is_elf64le(const uint8_t *buf, size_t len)
{
	return len >= sizeof(Elf64_Ehdr) && elf_is_elf(buf, len) && buf[EI_CLASS] == ELFCLASS64 &&
	       buf[EI_DATA] == ELFDATA2LSB;
}

int elf_is_static(const uint8_t *buf, size_t len)
{
	Elf64_Ehdr eh;

	if (!elf_is_elf64le(buf, len))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_machine != EM_X86_64 || eh.e_phentsize < sizeof(Elf64_Phdr) || eh.e_phoff > len ||
	    (uint64_t)eh.e_phnum * eh.e_phentsize > len - eh.e_phoff)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		uint32_t type;

		memcpy(&type, buf + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof(type));
		if (type == PT_INTERP)
			return 0;
	}
	return 1;
}

int elf_section(const uint8_t *buf, size_t len, const char *name, const uint8_t **data,
		size_t *size)
{
	size_t nlen = strlen(name) + 1;
	Elf64_Ehdr eh;
	Elf64_Shdr str, sh;

	*data = NULL;
	*size = 0;
	if (!elf_is_elf64le(buf, len))
		return -ENOEXEC;
	memcpy(&eh, buf, sizeof(eh));
	if (eh.e_shentsize < sizeof(Elf64_Shdr) || eh.e_shoff > len ||
	    (uint64_t)eh.e_shnum * eh.e_shentsize > len - eh.e_shoff || eh.e_shstrndx >= eh.e_shnum)
		return -ENOEXEC;
	memcpy(&str, buf + eh.e_shoff + (uint64_t)eh.e_shstrndx * eh.e_shentsize, sizeof(str));
	if (str.sh_offset > len || str.sh_size > len - str.sh_offset)
		return -ENOEXEC;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		memcpy(&sh, buf + eh.e_shoff + (uint64_t)i * eh.e_shentsize, sizeof(sh));
		if (sh.sh_name >= str.sh_size || str.sh_size - sh.sh_name < nlen ||
		    memcmp(buf + str.sh_offset + sh.sh_name, name, nlen))
			continue;
		if (sh.sh_offset > len || sh.sh_size > len - sh.sh_offset)
			return -ENOEXEC;
		*data = buf + sh.sh_offset;
		*size = sh.sh_size;
		return 0;
	}
	return 0;
}

int elf_linux_version(const uint8_t *buf, size_t len, const char **s, size_t *max)
{
	static const char banner[] = "Linux version ";
	const uint8_t *p = memmem(buf, len, banner, sizeof(banner) - 1);

	if (!p)
		return -ENOENT;
	p += sizeof(banner) - 1;
	*s = (const char *)p;
	*max = len - (size_t)(p - buf);
	return 0;
}

/* Header checks; *ph gets the program header table (bounds-checked). */
static int elf_check(const uint8_t *buf, size_t len, const Elf64_Phdr **ph, char *why,
		     size_t why_len)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;

	if (len < sizeof(*eh) || !elf_is_elf(buf, len)) {
		why_set(why, why_len, 0, "not an ELF file");
		return -EINVAL;
	}
	if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
	    eh->e_machine != EM_X86_64) {
		why_set(why, why_len, 0, "not an x86-64 ELF");
		return -ENOEXEC;
	}
	if (eh->e_type != ET_EXEC) {
		why_set(why, why_len, 0, "not an ELF executable (ET_EXEC)");
		return -ENOEXEC;
	}
	if (eh->e_phentsize != sizeof(Elf64_Phdr) || !eh->e_phnum || eh->e_phoff > len ||
	    (len - eh->e_phoff) / sizeof(Elf64_Phdr) < eh->e_phnum || eh->e_phoff % 8) {
		why_set(why, why_len, 0, "ELF program headers outside the file (truncated?)");
		return -EINVAL;
	}
	*ph = (const Elf64_Phdr *)(buf + eh->e_phoff);
	return 0;
}

/* The PVH entry from the ELF's notes: 0 and *entry, or -ENOENT. */
static int elf_pvh_entry(const uint8_t *buf, size_t len, uint64_t *entry)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	const Elf64_Phdr *ph;
	if (elf_check(buf, len, &ph, NULL, 0))
		return -ENOENT;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		uint64_t off = ph[i].p_offset, end, pos;

		if (ph[i].p_type != PT_NOTE || off > len || ph[i].p_filesz > len - off)
			continue;
		end = off + ph[i].p_filesz;
		for (pos = off; end - pos >= 12;) {
			uint32_t namesz, descsz, type;
			uint64_t name, desc, next;

			memcpy(&namesz, buf + pos, 4);
			memcpy(&descsz, buf + pos + 4, 4);
			memcpy(&type, buf + pos + 8, 4);
			name = pos + 12;
			desc = name + (((uint64_t)namesz + 3) & ~3ull);
			next = desc + (((uint64_t)descsz + 3) & ~3ull);
			if (next > end)
				break;
			if (namesz == 4 && !memcmp(buf + name, "Xen", 4) &&
			    type == XEN_ELFNOTE_PHYS32_ENTRY && (descsz == 4 || descsz == 8)) {
				uint64_t v = 0;

				memcpy(&v, buf + desc, descsz);
				*entry = v;
				return 0;
			}
			pos = next;
		}
	}
	return -ENOENT;
}

/*
 * Put a segment's file bytes at dst: mapped from fd where the file offset and dst agree
 * modulo the page size (whole pages only; the partial pages at either end are copied, so
 * nothing past p_filesz comes from the file), else copied.
 */
static int elf_segment_place(uint8_t *dst, const uint8_t *buf, uint64_t off, uint64_t filesz,
			     int fd)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), head, mid;
	void *p;

	if (fd < 0 || off % page != (uintptr_t)dst % page) {
		memcpy(dst, buf + off, filesz);
		return 0;
	}
	head = (page - off % page) % page;
	head = head < filesz ? head : filesz;
	mid = (filesz - head) / page * page;
	memcpy(dst, buf + off, head);
	if (mid) {
		/*
		 * Read-only first, populated: the host page table then already holds the page
		 * cache's pages (no copy), and the guest's first touch of each costs no host
		 * fault. Writable afterwards: a page the guest writes is copied then (private).
		 */
		p = mmap(dst + head, mid, PROT_READ, MAP_PRIVATE | MAP_FIXED | MAP_POPULATE, fd,
			 (off_t)(off + head));
		if (p != MAP_FAILED && mprotect(p, mid, PROT_READ | PROT_WRITE))
			p = MAP_FAILED;
		if (p == MAP_FAILED) {
			/* a failed MAP_FIXED may have unmapped the range: put RAM back, copy */
			p = mmap(dst + head, mid, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
			if (p == MAP_FAILED)
				return -errno;
			memcpy(dst + head, buf + off + head, mid);
		}
	}
	memcpy(dst + head + mid, buf + off + head + mid, filesz - head - mid);
	return 0;
}

int elf_load(const uint8_t *buf, size_t len, const struct vm_ram *ram, enum boot_proto proto,
	     struct boot_kernel *k, char *why, size_t why_len)
{
	return elf_load_mapped(buf, len, -1, ram, proto, k, why, why_len);
}

int elf_load_mapped(const uint8_t *buf, size_t len, int fd, const struct vm_ram *ram,
		    enum boot_proto proto, struct boot_kernel *k, char *why, size_t why_len)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
	const Elf64_Phdr *ph;
	uint64_t lo = UINT64_MAX, hi = 0, entry = eh->e_entry, phys_entry = UINT64_MAX;
	unsigned loads = 0;
	int ret = elf_check(buf, len, &ph, why, why_len);

	if (ret)
		return ret;
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		const Elf64_Phdr *p = &ph[i];
		uint8_t *dst;

		if (p->p_type != PT_LOAD || !p->p_memsz)
			continue;
		if (p->p_filesz > p->p_memsz || p->p_offset > len || p->p_filesz > len - p->p_offset) {
			why_set(why, why_len, 0, "ELF segment outside the file (truncated?)");
			return -EINVAL;
		}
		if (p->p_paddr < BOOT_HIMEM_ADDR || p->p_paddr + p->p_memsz < p->p_paddr) {
			why_set(why, why_len, 0,
				"ELF segment below 1 MiB (over the VMM's boot pages)");
			return -EINVAL;
		}
		dst = vm_ram_ptr(ram, p->p_paddr, p->p_memsz);
		if (!dst) {
			why_set(why, why_len, 0, "ELF segment outside guest RAM (more --mem?)");
			return -ENOSPC;
		}
		ret = elf_segment_place(dst, buf, p->p_offset, p->p_filesz, fd);
		if (ret) {
			why_set(why, why_len, 0,
				"cannot map guest RAM back after a failed kernel mapping");
			return ret;
		}
		if (entry >= p->p_paddr && entry - p->p_paddr < p->p_memsz)
			phys_entry = entry;
		else if (phys_entry == UINT64_MAX && entry >= p->p_vaddr &&
			 entry - p->p_vaddr < p->p_memsz)
			phys_entry = entry - p->p_vaddr + p->p_paddr;
		lo = p->p_paddr < lo ? p->p_paddr : lo;
		hi = p->p_paddr + p->p_memsz > hi ? p->p_paddr + p->p_memsz : hi;
		loads++;
	}
	if (!loads) {
		why_set(why, why_len, 0, "ELF has no loadable segment");
		return -ENOEXEC;
	}
	k->proto = proto;
	k->lo = lo;
	k->hi = hi;
	if (proto == BOOT_PVH) {
		if (elf_pvh_entry(buf, len, &k->entry)) {
			why_set(why, why_len, 0,
				"ELF has no PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY): use --boot linux64");
			return -ENOEXEC;
		}
		return 0;
	}
	if (phys_entry == UINT64_MAX) {
		why_set(why, why_len, 0, "ELF entry point outside its loadable segments");
		return -ENOEXEC;
	}
	k->entry = phys_entry;
	return 0;
}
