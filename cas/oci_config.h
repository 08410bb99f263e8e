/* SPDX-License-Identifier: MIT */
/*
 * The parts of an OCI image config (the "config" blob a manifest names) that say how to run
 * a command from the image: Entrypoint, Cmd, Env, WorkingDir, User. `lazyblk run` and
 * `lazyblk initramfs` read them from the lazyblk manifest, which keeps the config's JSON.
 */
#ifndef LZ_CAS_OCI_CONFIG_H
#define LZ_CAS_OCI_CONFIG_H

#include <stddef.h>

#include "../common/why.h"

struct oci_config {
	char **entrypoint;
	size_t n_entrypoint;
	char **cmd;
	size_t n_cmd;
	char **env;             /* "KEY=VALUE" */
	size_t n_env;
	char *workdir;          /* NULL: "/" */
	char *user;             /* NULL: root; "uid", "uid:gid", "name", "name:group" */
};

/*
 * Parse an OCI image config JSON (the whole config, {"config": {...}}, docker's
 * {"Config": {...}}, or the inner object). A string where a list belongs is taken as a
 * list of one; null and absent fields are empty. Returns 0, or -EINVAL / -ENOMEM with the
 * reason in why (common/why.h) and *out empty. Free with oci_config_free.
 */
int oci_config_parse(const char *json, size_t len, struct oci_config *out, char *why,
		     size_t why_len);
/* Free what oci_config_parse allocated; *c is zeroed (freeing it again is harmless). */
void oci_config_free(struct oci_config *c);

#endif
