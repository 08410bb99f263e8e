/* SPDX-License-Identifier: MIT */
/*
 * Inside blkd/serve/: what a server needs to run under a supervisor (supervise.c): a locked
 * pid file, the systemd notification protocol (written here, no libsystemd), the
 * parent-death signal, and a captive command (--run). Nothing prints: -errno and one line in
 * why (the option named, as `lazyblk serve` says it), warnings as notes.
 */
#ifndef LZ_BLKD_SERVE_INT_H
#define LZ_BLKD_SERVE_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "../../common/why.h"

/*
 * --pidfile: create path (O_EXCL), or open it if it is a regular file (a symbolic link is
 * not followed, a FIFO or a device not opened: refused), and take a write lock on it, so that
 * a second server of the same file is refused; the file is emptied. *fd gets the descriptor
 * (keep it open: closing any descriptor of the file drops the lock). 0, or -errno with why
 * ("held by process N", "a symbolic link (not followed)", "not a regular file").
 */
int serve_pidfile_lock(const char *path, int *fd, char *why, size_t why_len);
/* Write this process's pid (and a newline) into the locked file. 0, or -errno with why. */
int serve_pidfile_write(const char *path, int fd, char *why, size_t why_len);
/* At exit: remove the file (while still holding the lock) if path still names it, close it. */
void serve_pidfile_remove(const char *path, int fd);

/*
 * sd_notify(3)'s protocol: msg (e.g. "READY=1\nSTATUS=...") as one datagram to the unix
 * socket named by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace); nothing
 * when it is unset. A failure is a warning (a note), not fatal.
 */
void serve_notify(const char *msg, const struct note_sink *notes);

/*
 * --exit-with-parent: SIGTERM when the parent exits (PR_SET_PDEATHSIG), and at once if it
 * has exited already (ppid: getppid() at the start of the command). 0, or -errno with why.
 */
int serve_exit_with_parent(pid_t ppid, char *why, size_t why_len);

/*
 * --run: start /bin/sh -c cmd with env (NULL-terminated "NAME=VALUE" strings) added to this
 * process's environment (replacing variables of those names; NOTIFY_SOCKET removed), every
 * signal unblocked and at its default action. 0 with *pid, or -errno with why.
 */
int serve_spawn(const char *cmd, char *const *env, pid_t *pid, char *why, size_t why_len);
/* A child's wait status as an exit status: its exit code, or 128 + the signal. */
int serve_exit_status(int wstatus);

#endif
