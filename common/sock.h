/* SPDX-License-Identifier: MIT */
/* Listening sockets shared by the servers (NBD export, control socket). */
#ifndef LZ_COMMON_SOCK_H
#define LZ_COMMON_SOCK_H

#include <sys/types.h>

/*
 * A non-blocking, close-on-exec unix stream socket listening on path. A socket file that
 * nothing accepts on any more (a server that died) is replaced; a live one, or a path that
 * is not a socket, is -EADDRINUSE. mode (if not 0) is applied to the socket file.
 * label prefixes the one error line printed on failure ("unix:PATH", "--control PATH").
 */
int sock_listen_unix(const char *path, mode_t mode, int backlog, const char *label, int *out);

#endif
