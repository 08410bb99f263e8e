/* SPDX-License-Identifier: MIT */
/*
 * The kernel's release string ("6.1.0-27-cloud-amd64"): it names the kernel's modules
 * directory. From a bzImage's setup header (bzimage.c) or a vmlinux's banner (elf.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../boot.h"
#include "internal.h"

int kernel_release(const uint8_t *d, size_t len, char *ver, size_t vlen, char *why,
		   size_t why_len)
{
	const char *s = NULL;
	size_t max = 0, n;
	int rc = bzimage_kernel_version(d, len, &s, &max, why, why_len);

	if (rc == -ENOENT) {
		if (!elf_is_elf64le(d, len)) {
			why_set(why, why_len, 0,
				"not a Linux kernel (no bzImage setup header, not an ELF vmlinux)");
			return -ENOEXEC;
		}
		if (elf_linux_version(d, len, &s, &max)) {
			why_set(why, why_len, 0, "vmlinux has no 'Linux version' banner");
			return -ENOEXEC;
		}
	} else if (rc) {
		return rc;
	}
	for (n = 0; n < max && n < 128 && s[n] > ' ' && s[n] < 0x7f; n++)
		;
	if (!n || n >= vlen || s[0] == '.' || memchr(s, '/', n)) {
		why_set(why, why_len, 0, "kernel version string is empty or malformed");
		return -ENOEXEC;
	}
	memcpy(ver, s, n);
	ver[n] = 0;
	return 0;
}

int initramfs_kernel_version(const char *kernel, char *ver, size_t len, char *why,
			     size_t why_len)
{
	uint8_t *d;
	size_t n;
	int rc = fs_read_file(kernel, &d, &n);

	if (rc) {
		return why_set(why, why_len, rc, "%s", strerror(-rc));
	}
	rc = kernel_release(d, n, ver, len, why, why_len);
	free(d);
	return rc;
}
