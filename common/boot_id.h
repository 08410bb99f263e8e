/* SPDX-License-Identifier: MIT */
/*
 * The kernel's boot id: a random UUID the kernel draws at every boot
 * (/proc/sys/kernel/random/boot_id). Two processes that read the same one run in the same
 * boot, so what one gave the kernel (the page cache) the other sees; after a host crash or
 * a reboot it differs. The overlay tags its live state file with it (docs/reliability.md).
 */
#ifndef LZ_COMMON_BOOT_ID_H
#define LZ_COMMON_BOOT_ID_H

#include <stdint.h>

#include "test_hook.h"

#define BOOT_ID_LEN 16
#define BOOT_ID_PATH "/proc/sys/kernel/random/boot_id"

/*
 * This boot's id, read with open(2) and read(2) each call (the crash soak's crashsim.so
 * gives the server another one after a simulated host crash by catching that open).
 * 0, -errno, or -EBADMSG when the file does not hold a UUID.
 */
int boot_id_read(uint8_t id[BOOT_ID_LEN]);

/* Tests only: boot_id_read() returns id from now on; NULL reads the kernel's again. */
TEST_HOOK
void boot_id_set_for_test(const uint8_t *id);

#endif
