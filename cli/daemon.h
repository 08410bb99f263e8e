/* SPDX-License-Identifier: MIT */
/*
 * What a server (lazyblk serve) needs to run under a supervisor: a locked pid file, the
 * systemd notification protocol (written here, no libsystemd), the parent-death signal, and
 * a captive command (--run). Each failure prints one line.
 */
#ifndef LZ_CLI_DAEMON_H
#define LZ_CLI_DAEMON_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * --pidfile: create path (O_EXCL), or open it if it is a regular file (a symbolic link is
 * not followed, a FIFO or a device not opened: refused), and take a write lock on it, so that
 * a second server of the same file is refused; the file is emptied. *fd gets the descriptor
 * (keep it open: closing any descriptor of the file drops the lock). 0, or 1 (said why:
 * "held by process N", "a symbolic link (not followed)", "not a regular file").
 */
int daemon_pidfile_lock(const char *path, int *fd);
/* Write this process's pid (and a newline) into the locked file. 0, or 1 (said why). */
int daemon_pidfile_write(const char *path, int fd);
/* At exit: remove the file (while still holding the lock) if path still names it, close it. */
void daemon_pidfile_remove(const char *path, int fd);

/*
 * sd_notify(3)'s protocol: msg (e.g. "READY=1\nSTATUS=...") as one datagram to the unix
 * socket named by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace); nothing
 * when it is unset. A failure is a warning, not fatal.
 */
void daemon_notify(const char *msg);

/*
 * --exit-with-parent: SIGTERM when the parent exits (PR_SET_PDEATHSIG), and at once if it
 * has exited already (ppid: getppid() at the start of the command). 0, or 1 (said why).
 */
int daemon_exit_with_parent(pid_t ppid);

/*
 * --run: start /bin/sh -c cmd with env (NULL-terminated "NAME=VALUE" strings) added to this
 * process's environment (replacing variables of those names; NOTIFY_SOCKET removed), every
 * signal unblocked and at its default action. 0 with *pid, or 1 (said why).
 */
int daemon_run_spawn(const char *cmd, char *const *env, pid_t *pid);
/* A child's wait status as an exit status: its exit code, or 128 + the signal. */
int daemon_exit_status(int wstatus);

#endif
