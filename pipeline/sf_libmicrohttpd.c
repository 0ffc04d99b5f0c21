/* sf_libmicrohttpd.c: the MHD_* functions spanfence calls, forwarded to
 * libmicrohttpd.so.12 loaded on first use (sf_libmicrohttpd.h says why).
 * A function not defined here is an undefined reference at link time, not
 * a surprise at run time; the definitions do not interpose on
 * libmicrohttpd's own calls (no linked library refers to them, so the
 * program does not export them; the library is opened RTLD_LOCAL). */
#include "sf_libmicrohttpd.h"

#include "sf_dl.h"

#include <stdarg.h>
#include <stdio.h>

#include <microhttpd.h>

#define SF_LIBMICROHTTPD_SONAME "libmicrohttpd.so.12"

/* name, return type, parameters, arguments, what a failed load returns */
#define SF_MHD_FUNCS(X)                                                                        \
    X(MHD_stop_daemon, void, (struct MHD_Daemon *d), (d), )                                    \
    X(MHD_lookup_connection_value, const char *,                                               \
      (struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key), (c, kind, key),    \
      NULL)                                                                                    \
    X(MHD_get_connection_values, int,                                                          \
      (struct MHD_Connection *c, enum MHD_ValueKind kind, MHD_KeyValueIterator it, void *cls), \
      (c, kind, it, cls), 0)                                                                   \
    X(MHD_create_response_from_buffer, struct MHD_Response *,                                  \
      (size_t size, void *buffer, enum MHD_ResponseMemoryMode mode), (size, buffer, mode),     \
      NULL)                                                                                    \
    X(MHD_add_response_header, enum MHD_Result,                                                \
      (struct MHD_Response *r, const char *header, const char *content), (r, header, content), \
      MHD_NO)                                                                                  \
    X(MHD_queue_response, enum MHD_Result,                                                     \
      (struct MHD_Connection *c, unsigned int code, struct MHD_Response *r), (c, code, r),     \
      MHD_NO)                                                                                  \
    X(MHD_destroy_response, void, (struct MHD_Response *r), (r), )                             \
    X(MHD_quiesce_daemon, MHD_socket, (struct MHD_Daemon *d), (d), MHD_INVALID_SOCKET)

/* One pointer per function, of the function's own type (SF_DL_FIELD) */
struct sf_mhd_fns {
#define SF_MHD_FIELD(name, ret, params, args, fail) SF_DL_FIELD(name)
    SF_MHD_FUNCS(SF_MHD_FIELD)
#undef SF_MHD_FIELD
    SF_DL_FIELD(MHD_start_daemon_va)
    SF_DL_FIELD(MHD_get_connection_info)
};
#define SF_DL_FNS struct sf_mhd_fns

static struct sf_mhd_fns fns;

static const sf_dl_sym syms[] = {
#define SF_MHD_ROW(name, ret, params, args, fail) SF_DL_ROW(name)
    SF_MHD_FUNCS(SF_MHD_ROW)
#undef SF_MHD_ROW
    SF_DL_ROW(MHD_start_daemon_va)
    SF_DL_ROW(MHD_get_connection_info)
    { NULL, 0 }
};

static sf_dl_lib lib = SF_DL_LIB(SF_LIBMICROHTTPD_SONAME, "libmicrohttpd12", syms, &fns, NULL);

static const struct sf_mhd_fns *api(void)
{
    return sf_dl_api(&lib);
}

sf_status sf_libmicrohttpd_load(void)
{
    return api() != NULL ? SF_OK : SF_IO;
}

const char *sf_libmicrohttpd_error(void)
{
    return lib.error;
}

#define SF_MHD_FORWARD(name, ret, params, args, fail)      \
    ret name params                                        \
    {                                                      \
        const struct sf_mhd_fns *f = api();                \
        if (f == NULL)                                     \
            return fail;                                   \
        return f->name args;                               \
    }
SF_MHD_FUNCS(SF_MHD_FORWARD)
#undef SF_MHD_FORWARD

struct MHD_Daemon *MHD_start_daemon(unsigned int flags, uint16_t port,
                                    MHD_AcceptPolicyCallback apc, void *apc_cls,
                                    MHD_AccessHandlerCallback dh, void *dh_cls, ...)
{
    const struct sf_mhd_fns *f = api();
    struct MHD_Daemon *d;
    va_list ap;

    if (f == NULL)
        return NULL;
    va_start(ap, dh_cls);
    d = f->MHD_start_daemon_va(flags, port, apc, apc_cls, dh, dh_cls, ap);
    va_end(ap);
    return d;
}

/* The info types spanfence asks for (the client's address, its socket)
 * take no further argument. */
const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c,
                                                        enum MHD_ConnectionInfoType type, ...)
{
    const struct sf_mhd_fns *f = api();

    return f != NULL ? f->MHD_get_connection_info(c, type) : NULL;
}
