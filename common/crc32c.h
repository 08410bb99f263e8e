/* SPDX-License-Identifier: MIT */
/*
 * CRC-32C (Castagnoli), as ext4 and jbd2 use it: crc32c(seed, buf) continues a running
 * value without pre/post inversion, i.e. the kernel's crc32c_le(). ext4's metadata_csum
 * starts from ~0 (crc32c(~0, ...)) and stores the result as is.
 */
#ifndef LZ_COMMON_CRC32C_H
#define LZ_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

uint32_t crc32c(uint32_t crc, const void *buf, size_t len);

#endif
