/* SPDX-License-Identifier: MIT */
/* Listening sockets shared by the servers (NBD export, control socket). */
#ifndef LZ_COMMON_SOCK_H
#define LZ_COMMON_SOCK_H

#include <sys/types.h>

/*
 * A non-blocking, close-on-exec unix stream socket listening on path. A socket file of this
 * user's that nothing accepts on any more (a server that died) is replaced; a live one,
 * another user's, or a path that is not a socket is -EADDRINUSE. mode (if not 0) is the
 * socket file's from its creation (less the umask; no chmod by path, which a swap of the
 * path would aim elsewhere). label prefixes the one error line printed on failure
 * ("unix:PATH", "--control PATH").
 */
int sock_listen_unix(const char *path, mode_t mode, int backlog, const char *label, int *out);
/* Remove the socket file at path at the end of its server: only if it is a socket. */
void sock_unlink_unix(const char *path);

#endif
