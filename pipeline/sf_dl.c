/* sf_dl.c: the loader of the libraries opened on first use (sf_dl.h). */
#include "sf_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* Opens lib and resolves its functions into lib->fns; false with the
 * reason in lib->error. */
static bool load(sf_dl_lib *lib)
{
    void *so = dlopen(lib->soname, RTLD_NOW | RTLD_LOCAL);

    if (so == NULL) {
        snprintf(lib->error, sizeof(lib->error), "cannot load %s (Debian: %s): %s", lib->soname,
                 lib->package, dlerror());
        return false;
    }
    for (const sf_dl_sym *s = lib->syms; s->name != NULL; s++) {
        void *addr = dlsym(so, s->name);

        if (addr == NULL) {
            snprintf(lib->error, sizeof(lib->error), "%s lacks %s", lib->soname, s->name);
            return false;
        }
        /* dlsym's void * into a function pointer of the caller's type:
         * what POSIX defines dlsym for (both have one representation) */
        memcpy((char *)lib->fns + s->offset, &addr, sizeof(addr));
    }
    return lib->init == NULL || lib->init(lib);
}

const void *sf_dl_api(sf_dl_lib *lib)
{
    int state = atomic_load_explicit(&lib->state, memory_order_acquire);

    if (state == 0) {
        /* the first caller loads; the others wait for its answer */
        pthread_mutex_lock(&lib->mu);
        state = atomic_load_explicit(&lib->state, memory_order_relaxed);
        if (state == 0) {
            state = load(lib) ? 1 : -1;
            atomic_store_explicit(&lib->state, state, memory_order_release);
        }
        pthread_mutex_unlock(&lib->mu);
    }
    return state == 1 ? lib->fns : NULL;
}

bool sf_dl_loaded(sf_dl_lib *lib)
{
    return atomic_load_explicit(&lib->state, memory_order_acquire) == 1;
}
