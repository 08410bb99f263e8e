// SPDX-License-Identifier: MIT
/* dlopen-at-first-use for the heavy optional libraries (see dl.h). */
#include "dl.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>

#include "log.h"

/* serialises first loads; dl_load() is called at module entry points, never per I/O */
static pthread_mutex_t dl_lock = PTHREAD_MUTEX_INITIALIZER;

static int dl_open(struct dl_lib *lib)
{
	void *h = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);

	if (!h) {
		log_error("cannot load %s (apt-get install %s): %s", lib->soname, lib->package,
			  dlerror());
		return -ELIBACC;
	}
	for (size_t i = 0; i < lib->n_syms; i++) {
		*lib->syms[i].addr = dlsym(h, lib->syms[i].name);
		if (!*lib->syms[i].addr) {
			log_error("%s has no %s (too old a version?)", lib->soname,
				  lib->syms[i].name);
			return -ELIBACC;
		}
	}
	if (lib->check) {
		char why[256] = "";

		if (lib->check(why, sizeof(why))) {
			log_error("%s", why[0] ? why : lib->soname);
			return -ELIBACC;
		}
	}
	return 0; /* the handle stays open for the life of the process */
}

int dl_load(struct dl_lib *lib)
{
	int ret;

	pthread_mutex_lock(&dl_lock);
	if (!lib->tried) {
		lib->err = dl_open(lib);
		lib->tried = true;
	}
	ret = lib->err;
	pthread_mutex_unlock(&dl_lock);
	return ret;
}
