/* sf_libcurl.c: libcurl's functions, forwarded to libcurl.so.4 loaded on
 * first use (sf_libcurl.h says why). Each curl_* function spanfence calls
 * is defined here under its own name, so callers, tests and tools use
 * libcurl's API unchanged; a function not listed here is an undefined
 * reference at link time, not a surprise at run time.
 *
 * The definitions do not interpose on libcurl's own calls: a program's
 * symbols are exported only when a shared library it links refers to them,
 * and none does (libcurl is opened RTLD_LOCAL, after the link). */
#include "sf_libcurl.h"

#include "sf_dl.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include <curl/curl.h>

/* Debian's libcurl4 (the OpenSSL build, libcurl4-openssl-dev's runtime);
 * the .deb's Depends names it (CMakeLists.txt), as dpkg-shlibdeps would
 * for a linked library. */
#define SF_LIBCURL_SONAME "libcurl.so.4"

#define SF_CURL_FUNCS(X) \
    X(curl_global_init) X(curl_global_cleanup) X(curl_free) \
    X(curl_easy_init) X(curl_easy_cleanup) X(curl_easy_setopt) X(curl_easy_getinfo) \
    X(curl_easy_perform) X(curl_easy_strerror) X(curl_easy_escape) \
    X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_setopt) \
    X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_perform) \
    X(curl_multi_poll) X(curl_multi_info_read) \
    X(curl_slist_append) X(curl_slist_free_all) \
    X(curl_url) X(curl_url_cleanup) X(curl_url_get) X(curl_url_set)

/* One pointer per function, of the function's own type (SF_DL_FIELD) */
struct sf_curl_fns {
    SF_CURL_FUNCS(SF_DL_FIELD)
};
#define SF_DL_FNS struct sf_curl_fns

static struct sf_curl_fns fns;

static const sf_dl_sym syms[] = {
    SF_CURL_FUNCS(SF_DL_ROW)
    { NULL, 0 }
};

/* Never undone (curl_global_cleanup is not thread-safe). */
static bool global_init(sf_dl_lib *l)
{
    CURLcode rc = fns.curl_global_init(CURL_GLOBAL_DEFAULT);

    if (rc != CURLE_OK) {
        snprintf(l->error, sizeof(l->error), "libcurl initialisation failed: %s",
                 fns.curl_easy_strerror(rc));
        return false;
    }
    return true;
}

static sf_dl_lib lib = SF_DL_LIB(SF_LIBCURL_SONAME, "libcurl4", syms, &fns, global_init);

static const struct sf_curl_fns *api(void)
{
    return sf_dl_api(&lib);
}

sf_status sf_libcurl_load(void)
{
    return api() != NULL ? SF_OK : SF_IO;
}

const char *sf_libcurl_error(void)
{
    return lib.error;
}

/* ---- the forwarders: a function that makes something returns what
 * libcurl returns for a failure when libcurl is missing; one that takes a
 * handle cannot be reached then, but answers the same way. */
#define SF_FORWARD(ret, name, params, args, fallback)       \
    ret(name) params                                        \
    {                                                       \
        const struct sf_curl_fns *f = api();                \
        return f != NULL ? (f->name) args : (fallback);     \
    }
#define SF_FORWARD_VOID(name, params, args)                 \
    void(name) params                                       \
    {                                                       \
        const struct sf_curl_fns *f = api();                \
        if (f != NULL)                                      \
            (f->name) args;                                 \
    }

SF_FORWARD(CURLcode, curl_global_init, (long flags), (flags), CURLE_FAILED_INIT)
SF_FORWARD_VOID(curl_global_cleanup, (void), ())
SF_FORWARD_VOID(curl_free, (void *p), (p))
SF_FORWARD(CURL *, curl_easy_init, (void), (), NULL)
SF_FORWARD_VOID(curl_easy_cleanup, (CURL *curl), (curl))
SF_FORWARD(CURLcode, curl_easy_perform, (CURL *curl), (curl), CURLE_FAILED_INIT)
SF_FORWARD(char *, curl_easy_escape, (CURL *curl, const char *s, int len), (curl, s, len), NULL)
SF_FORWARD(CURLM *, curl_multi_init, (void), (), NULL)
SF_FORWARD(CURLMcode, curl_multi_cleanup, (CURLM *m), (m), CURLM_BAD_HANDLE)
SF_FORWARD(CURLMcode, curl_multi_add_handle, (CURLM *m, CURL *c), (m, c), CURLM_BAD_HANDLE)
SF_FORWARD(CURLMcode, curl_multi_remove_handle, (CURLM *m, CURL *c), (m, c), CURLM_BAD_HANDLE)
SF_FORWARD(CURLMcode, curl_multi_perform, (CURLM *m, int *running), (m, running),
           CURLM_BAD_HANDLE)
SF_FORWARD(CURLMcode, curl_multi_poll,
           (CURLM *m, struct curl_waitfd extra[], unsigned int n, int timeout_ms, int *numfds),
           (m, extra, n, timeout_ms, numfds), CURLM_BAD_HANDLE)
SF_FORWARD(CURLMsg *, curl_multi_info_read, (CURLM *m, int *left), (m, left), NULL)
SF_FORWARD(struct curl_slist *, curl_slist_append, (struct curl_slist *list, const char *s),
           (list, s), NULL)
SF_FORWARD_VOID(curl_slist_free_all, (struct curl_slist *list), (list))
SF_FORWARD(CURLU *, curl_url, (void), (), NULL)
SF_FORWARD_VOID(curl_url_cleanup, (CURLU *u), (u))
SF_FORWARD(CURLUcode, curl_url_get, (CURLU *u, CURLUPart what, char **part,
                                     unsigned int flags), (u, what, part, flags), CURLUE_BAD_HANDLE)
SF_FORWARD(CURLUcode, curl_url_set, (CURLU *u, CURLUPart what, const char *part,
                                     unsigned int flags), (u, what, part, flags), CURLUE_BAD_HANDLE)

const char *(curl_easy_strerror)(CURLcode rc)
{
    const struct sf_curl_fns *f = api();
    return f != NULL ? (f->curl_easy_strerror)(rc) : "libcurl is not loaded";
}

/* The variadic three: the one argument after the option has the type the
 * option's number range says (CURLOPTTYPE_* for both the easy and the
 * multi options; every CURLINFO_* takes a pointer), read as that type and
 * passed on as it. */
typedef void (*sf_curl_fnptr)(void);

#define SF_FORWARD_OPTION(f, handle, option, ap)                                     \
    ((option) < CURLOPTTYPE_OBJECTPOINT     ? f(handle, option, va_arg(ap, long))    \
     : (option) < CURLOPTTYPE_FUNCTIONPOINT ? f(handle, option, va_arg(ap, void *))  \
     : (option) < CURLOPTTYPE_OFF_T         ? f(handle, option, va_arg(ap, sf_curl_fnptr)) \
     : (option) < CURLOPTTYPE_BLOB          ? f(handle, option, va_arg(ap, curl_off_t)) \
                                            : f(handle, option, va_arg(ap, void *)))

CURLcode(curl_easy_setopt)(CURL *curl, CURLoption option, ...)
{
    const struct sf_curl_fns *f = api();
    if (f == NULL)
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, option);
    CURLcode rc = SF_FORWARD_OPTION((f->curl_easy_setopt), curl, option, ap);
    va_end(ap);
    return rc;
}

CURLMcode(curl_multi_setopt)(CURLM *m, CURLMoption option, ...)
{
    const struct sf_curl_fns *f = api();
    if (f == NULL)
        return CURLM_BAD_HANDLE;
    va_list ap;
    va_start(ap, option);
    CURLMcode rc = SF_FORWARD_OPTION((f->curl_multi_setopt), m, option, ap);
    va_end(ap);
    return rc;
}

CURLcode(curl_easy_getinfo)(CURL *curl, CURLINFO info, ...)
{
    const struct sf_curl_fns *f = api();
    if (f == NULL)
        return CURLE_FAILED_INIT;
    va_list ap;
    va_start(ap, info);
    CURLcode rc = (f->curl_easy_getinfo)(curl, info, va_arg(ap, void *));
    va_end(ap);
    return rc;
}
