/* SPDX-License-Identifier: MIT */
/* Listening sockets shared by the servers (NBD export, control socket). */
#ifndef LZ_COMMON_SOCK_H
#define LZ_COMMON_SOCK_H

#include <sys/types.h>

/* A socket file at a path: its device and inode (0, 0: none known). */
struct sock_file {
	dev_t dev;
	ino_t ino;
};

/*
 * A non-blocking, close-on-exec unix stream socket listening on path. A socket file of this
 * user's that nothing accepts on any more (a server that died) is replaced; a live one (a
 * connect that succeeds, or says EAGAIN: a full backlog; it never waits), another user's, or
 * a path that is not a socket is -EADDRINUSE. mode (if not 0) is the socket file's from its
 * creation (less the umask; no chmod by path, which a swap of the path would aim elsewhere).
 * *file gets the socket file bind made, for sock_unlink_unix. label prefixes the one error
 * line printed on failure ("unix:PATH", "--control PATH").
 */
int sock_listen_unix(const char *path, mode_t mode, int backlog, const char *label, int *out,
		     struct sock_file *file);
/* The socket file now at path (an adopted listener's): 0, or -errno (-ENOTSOCK), *file 0. */
int sock_file_get(const char *path, struct sock_file *file);
/*
 * Remove the socket file at path at the end of its server: only if it is still that file
 * (device and inode), not one a newer server made there since, nor anything else.
 */
void sock_unlink_unix(const char *path, const struct sock_file *file);

#endif
