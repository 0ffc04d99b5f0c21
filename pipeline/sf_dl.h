/* sf_dl.h: a shared library spanfence opens on first use instead of
 * linking it (sf_libcurl.h, sf_libsystemd.h and sf_libcrypto.h say why for
 * each). The library's file keeps its list of functions, the struct of one
 * pointer per function and the forwarders; opening the library once,
 * resolving the list into the struct and saying what is missing is this
 * loader's. */
#ifndef SF_DL_H
#define SF_DL_H

#include <pthread.h>
#include <stdatomic.h>
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

/* A library loaded on first use, a static of its file (SF_DL_LIB): which
 * file, its functions and where they go, and what the load left. */
typedef struct sf_dl_lib {
    const char *soname;
    const char *package;        /* Debian's package of soname, named when it is missing */
    const sf_dl_sym *syms;      /* up to a row with no name */
    void *fns;                  /* the struct the rows' offsets are in */
    /* run once the functions are resolved (libcurl's global init), or NULL;
     * false fails the load, with the reason written in error */
    bool (*init)(struct sf_dl_lib *lib);
    pthread_mutex_t mu;         /* held by the one load */
    atomic_int state;           /* 0: not tried; 1: loaded; -1: failed, for good */
    char error[256];            /* why it failed; "" until then */
} sf_dl_lib;

#define SF_DL_LIB(soname_, package_, syms_, fns_, init_)                                  \
    { .soname = (soname_), .package = (package_), .syms = (syms_), .fns = (fns_),          \
      .init = (init_), .mu = PTHREAD_MUTEX_INITIALIZER }

/* lib->fns with every function resolved, the library loaded by the first
 * call (dlopen RTLD_NOW | RTLD_LOCAL, never closed: it stays for the
 * process's life); NULL when it cannot be, then and on every later call,
 * the reason in lib->error ("cannot load libcurl.so.4 (Debian: libcurl4):
 * ...", "libcurl.so.4 lacks curl_url", or init's). Thread-safe. */
const void *sf_dl_api(sf_dl_lib *lib);

/* Whether lib is loaded, without loading it. */
bool sf_dl_loaded(sf_dl_lib *lib);

#endif
