/* tests/pipeline/test_net.c: endpoint strings (sf_net.h): host:port split
 * with IPv4, names and bracketed IPv6; malformed ones refused; numeric
 * resolution to the socket address a server binds; the client a peer
 * counts as for the queues' shares; the HTTP endpoints' start after READY. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sf_net.h"

static void test_split(void **state)
{
    char host[64];
    uint16_t port = 0;

    (void)state;
    assert_int_equal(sf_net_split("127.0.0.1:4318", host, sizeof(host), &port), SF_OK);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 4318);
    assert_int_equal(sf_net_split("localhost:0", host, sizeof(host), &port), SF_OK);
    assert_string_equal(host, "localhost");
    assert_int_equal(port, 0);
    assert_int_equal(sf_net_split("[::1]:8888", host, sizeof(host), &port), SF_OK);
    assert_string_equal(host, "::1");
    assert_int_equal(port, 8888);
    assert_int_equal(sf_net_split("host:65535", host, sizeof(host), &port), SF_OK);
    assert_int_equal(port, 65535);

    assert_int_equal(sf_net_split("host", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split(":4317", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("host:", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("host:65536", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("host:-1", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("host:12a", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("[::1]8888", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("[::1:8888", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("averyveryverylonghostname:1", host, 8, &port), SF_INVALID);
}

/* The config's endpoint check: the problem named, or NULL. */
static void test_endpoint_problem(void **state)
{
    char buf[128];

    (void)state;
    assert_null(sf_net_endpoint_problem("127.0.0.1:4317", buf, sizeof(buf)));
    assert_null(sf_net_endpoint_problem("localhost:0", buf, sizeof(buf)));
    assert_null(sf_net_endpoint_problem("[::1]:65535", buf, sizeof(buf)));
    assert_null(sf_net_endpoint_problem("0.0.0.0:00080", buf, sizeof(buf)));
    assert_string_equal(sf_net_endpoint_problem("127.0.0.1:99999", buf, sizeof(buf)),
                        "port '99999' is out of range 0-65535");
    assert_string_equal(sf_net_endpoint_problem("127.0.0.1:65536", buf, sizeof(buf)),
                        "port '65536' is out of range 0-65535");
    assert_string_equal(sf_net_endpoint_problem("h:4294971613", buf, sizeof(buf)),
                        "port '4294971613' is out of range 0-65535");
    assert_string_equal(sf_net_endpoint_problem("localhost:abc", buf, sizeof(buf)),
                        "port 'abc' is not a number");
    assert_string_equal(sf_net_endpoint_problem("localhost:-1", buf, sizeof(buf)),
                        "port '-1' is not a number");
    assert_string_equal(sf_net_endpoint_problem("localhost: 80", buf, sizeof(buf)),
                        "port ' 80' is not a number");
    assert_string_equal(sf_net_endpoint_problem("4317", buf, sizeof(buf)),
                        "expected host:port ('127.0.0.1:4317'), found no port");
    assert_string_equal(sf_net_endpoint_problem(":4317", buf, sizeof(buf)),
                        "expected host:port ('127.0.0.1:4317'), found no host");
    assert_string_equal(sf_net_endpoint_problem("localhost:", buf, sizeof(buf)),
                        "expected host:port ('127.0.0.1:4317'), found no port");
    assert_string_equal(sf_net_endpoint_problem("::1:4317", buf, sizeof(buf)),
                        "an IPv6 host needs brackets ('[::1]:4317')");
    assert_non_null(sf_net_endpoint_problem("[::1]4317", buf, sizeof(buf)));
    assert_non_null(sf_net_endpoint_problem("[]:4317", buf, sizeof(buf)));
}

/* sf_net_split refuses what strtol would have taken: a sign, spaces. */
static void test_split_strict_port(void **state)
{
    char host[64];
    uint16_t port;

    (void)state;
    assert_int_equal(sf_net_split("h:+80", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("h: 80", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("h:70000", host, sizeof(host), &port), SF_INVALID);
    assert_int_equal(sf_net_split("h:0080", host, sizeof(host), &port), SF_OK);
    assert_int_equal(port, 80);
}

static void test_resolve(void **state)
{
    struct sockaddr_storage ss;
    socklen_t len = 0;

    (void)state;
    assert_int_equal(sf_net_resolve("127.0.0.1:4318", &ss, &len), SF_OK);
    assert_int_equal(ss.ss_family, AF_INET);
    assert_int_equal(len, sizeof(struct sockaddr_in));
    assert_int_equal(ntohs(((struct sockaddr_in *)&ss)->sin_port), 4318);
    assert_int_equal(ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr), INADDR_LOOPBACK);
    assert_int_equal(sf_net_resolve("[::1]:9", &ss, &len), SF_OK);
    assert_int_equal(ss.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 9);
    assert_int_equal(sf_net_resolve("no-port", &ss, &len), SF_INVALID);
}

static enum MHD_Result answer_ok(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *data,
                                 size_t *size, void **req_cls)
{
    struct MHD_Response *r;
    enum MHD_Result ret;

    (void)cls; (void)url; (void)method; (void)version; (void)data; (void)size; (void)req_cls;
    r = MHD_create_response_from_buffer(2, (void *)"ok", MHD_RESPMEM_PERSISTENT);
    ret = MHD_queue_response(conn, 200, r);
    MHD_destroy_response(r);
    return ret;
}

/* The collector's own small HTTP endpoints: listens where asked, answers
 * with the handler; an unresolvable endpoint (here a malformed one) or a taken port is an error. */
static void test_http_listen(void **state)
{
    struct MHD_Daemon *d = NULL, *d2 = NULL;
    const union MHD_DaemonInfo *info;
    char endpoint[64];

    (void)state;
    assert_int_equal(sf_net_http_listen("test", "127.0.0.1:0", answer_ok, NULL, &d), SF_OK);
    assert_non_null(d);
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    assert_non_null(info);
    assert_true(info->port > 0);
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%u", (unsigned)info->port);
    assert_int_equal(sf_net_http_listen("test", endpoint, answer_ok, NULL, &d2), SF_IO);
    assert_null(d2);
    MHD_stop_daemon(d);
    assert_int_equal(sf_net_http_listen("test", "no port here", answer_ok, NULL, &d2),
                     SF_INVALID);
    assert_null(d2);
}

/* A free loopback port (bound and closed: nothing else here takes it). */
static unsigned free_port(void)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static int connect_to(unsigned port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                              .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    assert_true(fd >= 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A GET sent on a new connection to `port`, its answer not read yet: the
 * connection's descriptor. */
static int get_sent(unsigned port)
{
    const char get[] = "GET / HTTP/1.0\r\n\r\n";
    int fd = connect_to(port);

    assert_true(fd >= 0);                   /* the port accepts (into its backlog) */
    assert_int_equal(send(fd, get, sizeof(get) - 1, 0), (ssize_t)(sizeof(get) - 1));
    return fd;
}

/* The answer on `fd` up to the peer's close (blocks until a daemon
 * answers), into `answer` (`size` bytes, terminated); closes `fd`. */
static void answer_read(int fd, char *answer, size_t size)
{
    size_t got = 0;
    ssize_t n;

    while (got < size - 1 && (n = recv(fd, answer + got, size - 1 - got, 0)) > 0)
        got += (size_t)n;
    answer[got] = '\0';
    close(fd);
}

/* The collector's start (sf_net_http_defer): an endpoint listens at once
 * and gets its daemon at READY (sf_net_http_run_deferred). Before, a
 * connection is accepted into the backlog and no daemon runs; a stop
 * before READY drops the start and frees the port; at READY the daemon
 * starts and answers the connection made before it. */
static void test_http_deferred(void **state)
{
    struct MHD_Daemon *d = NULL, *dropped = NULL;
    unsigned port = free_port(), port2 = free_port();
    char endpoint[64], endpoint2[64], answer[256];
    int fd;

    (void)state;
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%u", port);
    snprintf(endpoint2, sizeof(endpoint2), "127.0.0.1:%u", port2);
    sf_net_http_defer();
    assert_int_equal(sf_net_http_listen("test", endpoint, answer_ok, NULL, &d), SF_OK);
    assert_null(d);                         /* no daemon yet */
    assert_int_equal(sf_net_http_listen("test", endpoint2, answer_ok, NULL, &dropped), SF_OK);
    fd = get_sent(port);                    /* the port accepts already */
    sf_net_http_stop(&dropped);             /* stopped before READY */
    assert_null(dropped);
    assert_int_equal(connect_to(port2), -1);
    assert_int_equal(sf_net_http_run_deferred(), SF_OK);
    assert_non_null(d);
    answer_read(fd, answer, sizeof(answer));
    assert_non_null(strstr(answer, " 200 "));
    assert_non_null(strstr(answer, "\r\n\r\nok"));
    assert_null(dropped);                   /* a dropped start does not run */
    sf_net_http_stop(&d);
    assert_null(d);
    assert_int_equal(connect_to(port), -1);  /* closed with its daemon */
}

/* A start that takes longer than the deferral's 100 ms (an exporter
 * waiting on a FIFO): the endpoint's daemon starts then, without READY, and
 * answers the connection waiting in its backlog (health_check's 503 while
 * starting); READY then finds nothing left to start. */
static void test_http_deferred_past_wait(void **state)
{
    struct MHD_Daemon *d = NULL;
    unsigned port = free_port();
    char endpoint[64], answer[256];

    (void)state;
    snprintf(endpoint, sizeof(endpoint), "127.0.0.1:%u", port);
    sf_net_http_defer();
    assert_int_equal(sf_net_http_listen("test", endpoint, answer_ok, NULL, &d), SF_OK);
    /* answered by the deferral thread's daemon: READY never came */
    answer_read(get_sent(port), answer, sizeof(answer));
    assert_non_null(strstr(answer, " 200 "));
    assert_int_equal(sf_net_http_run_deferred(), SF_OK);
    assert_non_null(d);
    sf_net_http_stop(&d);
    assert_null(d);
}

/* A credential in a URL never reaches print-config or the status document. */
static void test_url_redacted(void **state)
{
    char buf[128];

    (void)state;
    assert_string_equal(sf_net_url_redacted("https://u:p4ss@gw:4318/v1", buf, sizeof(buf)),
                        "https://[REDACTED]@gw:4318/v1");
    assert_string_equal(sf_net_url_redacted("http://user@gw", buf, sizeof(buf)),
                        "http://[REDACTED]@gw");
    /* an @ in the path is not a user */
    assert_string_equal(sf_net_url_redacted("http://gw/a@b", buf, sizeof(buf)), "http://gw/a@b");
    assert_string_equal(sf_net_url_redacted("gw.example:4317", buf, sizeof(buf)),
                        "gw.example:4317");
}

/* A peer's client key: per address from another host (two connections of
 * one host are one client), per address and port on loopback (each local
 * connection a client of its own), IPv6 and v4-mapped loopback alike. */
static void test_client_key(void **state)
{
    struct sockaddr_in a = { .sin_family = AF_INET }, b;
    struct sockaddr_in6 c = { .sin6_family = AF_INET6 }, d;
    struct sockaddr_un { sa_family_t family; char path[8]; } u = { AF_UNIX, "x" };

    (void)state;
    inet_pton(AF_INET, "10.1.2.3", &a.sin_addr);
    a.sin_port = htons(40000);
    b = a;
    b.sin_port = htons(40001);
    assert_int_not_equal(sf_net_client_key((struct sockaddr *)&a), 0);
    assert_true(sf_net_client_key((struct sockaddr *)&a) == sf_net_client_key((struct sockaddr *)&b));
    inet_pton(AF_INET, "10.1.2.4", &b.sin_addr);
    assert_false(sf_net_client_key((struct sockaddr *)&a) == sf_net_client_key((struct sockaddr *)&b));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    inet_pton(AF_INET, "127.0.0.1", &b.sin_addr);
    b.sin_port = htons(40000);
    assert_true(sf_net_client_key((struct sockaddr *)&a) == sf_net_client_key((struct sockaddr *)&b));
    b.sin_port = htons(40001);
    assert_false(sf_net_client_key((struct sockaddr *)&a) == sf_net_client_key((struct sockaddr *)&b));
    inet_pton(AF_INET6, "::1", &c.sin6_addr);
    c.sin6_port = htons(5);
    d = c;
    d.sin6_port = htons(6);
    assert_false(sf_net_client_key((struct sockaddr *)&c) == sf_net_client_key((struct sockaddr *)&d));
    inet_pton(AF_INET6, "::ffff:127.0.0.1", &d.sin6_addr);
    c = d;
    c.sin6_port = htons(5);
    assert_false(sf_net_client_key((struct sockaddr *)&c) == sf_net_client_key((struct sockaddr *)&d));
    inet_pton(AF_INET6, "2001:db8::1", &c.sin6_addr);
    d = c;
    assert_true(sf_net_client_key((struct sockaddr *)&c) == sf_net_client_key((struct sockaddr *)&d));
    assert_int_equal(sf_net_client_key((struct sockaddr *)&u), 0);
    assert_int_equal(sf_net_client_key(NULL), 0);
    assert_int_equal(sf_net_client_of_fd(-1), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_endpoint_problem),
        cmocka_unit_test(test_url_redacted),
        cmocka_unit_test(test_split_strict_port),
        cmocka_unit_test(test_http_listen),
        cmocka_unit_test(test_http_deferred),
        cmocka_unit_test(test_http_deferred_past_wait),
        cmocka_unit_test(test_client_key),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
