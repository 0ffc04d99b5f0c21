/* tests/sf_test_http.h: a libmicrohttpd server on 127.0.0.1 and an
 * ephemeral port, for tests that need a real HTTP peer (header-only;
 * include it after <cmocka.h>). */
#ifndef SF_TEST_HTTP_H
#define SF_TEST_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>

/* Start serving `handler` (with `completed` called after each request);
 * *port gets the bound port. The caller stops it with MHD_stop_daemon. */
static inline struct MHD_Daemon *sf_test_http_start(MHD_AccessHandlerCallback handler, void *cls,
                                                    MHD_RequestCompletedCallback completed,
                                                    uint16_t *port)
{
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = 0 };
    const union MHD_DaemonInfo *info;
    struct MHD_Daemon *d;

    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler,
                         cls, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, cls, MHD_OPTION_END);
    assert_non_null(d);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    assert_true(info->port > 0);
    *port = info->port;
    return d;
}

#endif
