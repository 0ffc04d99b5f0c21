/* sf_dl.c: the loader of the libraries spanfence opens on first use
 * (sf_dl.h). */
#include "sf_dl.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

bool sf_dl_load(const char *soname, const char *package, const sf_dl_sym *syms, void *fns,
                char *err, size_t err_size)
{
    void *lib = dlopen(soname, RTLD_NOW | RTLD_LOCAL);

    if (lib == NULL) {
        snprintf(err, err_size, "cannot load %s (Debian: %s): %s", soname, package, dlerror());
        return false;
    }
    for (const sf_dl_sym *s = syms; s->name != NULL; s++) {
        void *addr = dlsym(lib, s->name);

        if (addr == NULL) {
            snprintf(err, err_size, "%s lacks %s", soname, s->name);
            return false;
        }
        /* dlsym's void * into a function pointer of the caller's type:
         * what POSIX defines dlsym for (both have one representation) */
        memcpy((char *)fns + s->offset, &addr, sizeof addr);
    }
    return true;
}
