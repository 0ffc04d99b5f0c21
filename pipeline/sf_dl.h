/* sf_dl.h: a shared library spanfence opens on first use instead of
 * linking it (sf_libcurl.h, sf_libsystemd.h and sf_libcrypto.h say why for
 * each). The library's file keeps its list of functions, a struct of one
 * pointer per function and the forwarders; opening the library, resolving
 * the list into the struct and saying what is missing is this loader's. */
#ifndef SF_DL_H
#define SF_DL_H

#include <stdbool.h>
#include <stddef.h>

/* One function to resolve: its name, and where its pointer goes in the
 * caller's struct of pointers. */
typedef struct sf_dl_sym {
    const char *name;
    size_t offset;
} sf_dl_sym;

/* The row for the pointer FIELD of struct TYPE, named as the function. */
#define SF_DL_SYM(type, field) { #field, offsetof(type, field) }

/* For a file's X-macro list of functions: SF_DL_FIELD declares a pointer of
 * the function's own type, as the library's header declares it (in
 * __typeof__'s parentheses a function-like macro of the same name, as
 * libcurl's typecheck-gcc.h has, does not apply); SF_DL_ROW is its row, in
 * the struct the file names SF_DL_FNS. */
#define SF_DL_FIELD(name) __typeof__(name) *name;
#define SF_DL_ROW(name) SF_DL_SYM(SF_DL_FNS, name),

/* Opens SONAME (dlopen RTLD_NOW | RTLD_LOCAL, never closed: the library
 * stays for the process's life) and stores the address of each function of
 * SYMS, up to a row with no name, at its offset in FNS. false when the
 * library or one of the functions is missing, with the reason in
 * ERR[ERR_SIZE] ("cannot load libcurl.so.4 (Debian: libcurl4): ...", or
 * "libcurl.so.4 lacks curl_url"); PACKAGE is the Debian package that holds
 * SONAME. Not thread-safe on its own: callers run it under pthread_once. */
bool sf_dl_load(const char *soname, const char *package, const sf_dl_sym *syms, void *fns,
                char *err, size_t err_size);

#endif
