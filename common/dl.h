/* SPDX-License-Identifier: MIT */
/*
 * Libraries loaded at first use (dlopen) instead of at process start.
 *
 * libcurl and libarchive pull in some forty shared objects (TLS, Kerberos, LDAP, ICU, ...)
 * whose loading and relocation cost ~10 ms at every exec, while only some commands need
 * them: `lazyblk run` without a remote must reach the guest's first instruction without
 * paying for them. Each library's functions are reached through sym_NAME pointers, filled
 * by its dl_*_load(), which the modules call at their entry points before any other use.
 */
#ifndef LZ_COMMON_DL_H
#define LZ_COMMON_DL_H

#include <stdbool.h>
#include <stddef.h>

struct dl_sym {
	const char *name;
	void **addr;
};

struct dl_lib {
	const char *soname;   /* e.g. "libcurl.so.4" */
	const char *package;  /* the Debian package that ships it, for the error line */
	const struct dl_sym *syms;
	size_t n_syms;
	/*
	 * Optional, run once the symbols are resolved: 0, or -errno with one line in why (a
	 * version too old to be safe). The library is then refused like a missing one.
	 */
	int (*check)(char *why, size_t why_len);
	bool tried;           /* set by the first dl_load() */
	int err;              /* its result: 0 or -ELIBACC */
};

/* In a header: declares sym_NAME for each NAME in the X-macro list SYMS. */
#define DL_DECLARE_ONE(s) extern __typeof__(s) *sym_##s;
#define DL_DECLARE(SYMS) SYMS(DL_DECLARE_ONE)

/*
 * In one .c file: defines the sym_* pointers of SYMS and `int LOADER(void)`, which loads
 * SONAME (shipped by Debian's PACKAGE) once and fills them (see dl_load).
 */
#define DL_DEFINE_ONE(s) __typeof__(s) *sym_##s;
#define DL_ENTRY_ONE(s) { #s, (void **)&sym_##s },
#define DL_DEFINE(SYMS, LOADER, SONAME, PACKAGE) \
	DL_DEFINE_CHECKED(SYMS, LOADER, SONAME, PACKAGE, NULL)
/* The same, with a check of the loaded library (struct dl_lib's check). */
#define DL_DEFINE_CHECKED(SYMS, LOADER, SONAME, PACKAGE, CHECK)                      \
	SYMS(DL_DEFINE_ONE)                                                          \
	static const struct dl_sym LOADER##_syms[] = { SYMS(DL_ENTRY_ONE) };          \
	static struct dl_lib LOADER##_lib = {                                         \
		.soname = SONAME,                                                    \
		.package = PACKAGE,                                                  \
		.syms = LOADER##_syms,                                               \
		.n_syms = sizeof(LOADER##_syms) / sizeof(LOADER##_syms[0]),          \
		.check = CHECK,                                                      \
	};                                                                           \
	int LOADER(void) { return dl_load(&LOADER##_lib); }

/*
 * Loads LIB, resolves all its symbols and runs its check, once per process (thread-safe).
 * 0, or -ELIBACC after one error line naming the library and what is missing or wrong
 * (printed once).
 */
int dl_load(struct dl_lib *lib);

#endif
