/* SPDX-License-Identifier: MIT */
/* OCI image layouts and docker-archive tarballs (placeholder until implemented). */
#include <errno.h>

#include "../common/log.h"
#include "import.h"

int import_oci(struct import_ctx *ic, const char *spec)
{
	(void)ic;
	log_error("oci:%s: OCI layouts are not supported yet", spec);
	return -ENOTSUP;
}

int import_docker_archive(struct import_ctx *ic, const char *file)
{
	(void)ic;
	log_error("docker-archive:%s: not supported yet", file);
	return -ENOTSUP;
}
