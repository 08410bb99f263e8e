/* SPDX-License-Identifier: MIT */
/* What mkfs's planner and emitter ask of a manifest entry: its name, link, ext4 type, mode. */
#include <string.h>
#include <sys/stat.h>

#include "ext4_fs.h"
#include "mkfs_int.h"

const char *mkfs_name_of(const struct manifest *m, const struct mf_entry *e, uint32_t *len)
{
	const char *p = manifest_path(m, e);
	const char *s = strrchr(p, '/');

	*len = (uint32_t)(e->path_len - (size_t)(s + 1 - p));
	return s + 1;
}

/* The entry a hardlink points at (validated by the manifest loader). */
size_t mkfs_link_target(const struct mkfs *k, const struct mf_entry *e)
{
	const struct mf_entry *t = manifest_find(k->m, manifest_str(k->m, e->link_off));

	return (size_t)(t - k->m->entries);
}

uint8_t mkfs_file_type(uint8_t t)
{
	switch (t) {
	case MF_REG: return EXT4_FT_REG_FILE;
	case MF_DIR: return EXT4_FT_DIR;
	case MF_SYMLINK: return EXT4_FT_SYMLINK;
	case MF_CHR: return EXT4_FT_CHRDEV;
	case MF_BLK: return EXT4_FT_BLKDEV;
	case MF_FIFO: return EXT4_FT_FIFO;
	case MF_SOCK: return EXT4_FT_SOCK;
	}
	return EXT4_FT_UNKNOWN;
}

uint16_t mkfs_mode_bits(uint8_t t)
{
	switch (t) {
	case MF_REG: return S_IFREG;
	case MF_DIR: return S_IFDIR;
	case MF_SYMLINK: return S_IFLNK;
	case MF_CHR: return S_IFCHR;
	case MF_BLK: return S_IFBLK;
	case MF_FIFO: return S_IFIFO;
	case MF_SOCK: return S_IFSOCK;
	}
	return 0;
}
