/* bench/sf_sink.c: a minimal OTLP/HTTP destination for benchmarks and soak
 * runs: accepts POST /v1/traces, /v1/logs, /v1/metrics (protobuf, gzip, zstd
 * or not), counts requests, bytes and items (spans, log records or metric
 * points, by the path's signal, walking the wire format), answers 200. Optional
 * faults: -f N answers 503 to every Nth request, -d MS answers each request
 * MS milliseconds late.
 * GET /stats prints "requests R spans S bytes B failed F" (S: items of every signal).
 *
 *   sf_sink [-p 4319] [-f N] [-d MS]                                       */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>
#include <zlib.h>

#include "sf_alloc.h"
#include "sf_request.h"
#include "sf_compress.h"
#include "sf_otlp_wire.h"

typedef struct body {
    unsigned char *data;
    size_t len, cap;
} body;

static _Atomic unsigned long n_requests, n_spans, n_bytes, n_failed;
static long fail_every;
static long delay_ms;

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), (void *)text,
                                                             MHD_RESPMEM_MUST_COPY);
    enum MHD_Result ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

static size_t count_spans(sf_signal sig, const unsigned char *data, size_t len, int gz)
{
    size_t spans = 0;

    if (gz) {
        z_stream z;
        size_t cap = len * 8 + 1024, out = 0;
        unsigned char *buf = malloc(cap);
        int rc;

        memset(&z, 0, sizeof(z));
        inflateInit2(&z, 15 + 16);
        z.next_in = (unsigned char *)data;
        z.avail_in = (uInt)len;
        do {
            if (out == cap) {
                cap *= 2;
                buf = realloc(buf, cap);
            }
            z.next_out = buf + out;
            z.avail_out = (uInt)(cap - out);
            rc = inflate(&z, Z_NO_FLUSH);
            out = cap - z.avail_out;
        } while (rc == Z_OK);
        inflateEnd(&z);
        if (rc == Z_STREAM_END)
            sf_otlp_scan_signal(sig, buf, out, 64, &spans);
        free(buf);
        return spans;
    }
    sf_otlp_scan_signal(sig, data, len, 64, &spans);
    return spans;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **req_cls)
{
    body *b = *req_cls;
    char text[160];

    (void)cls;
    (void)version;
    if (strcmp(method, "GET") == 0) {
        if (b == NULL) {
            *req_cls = (void *)1;
            return MHD_YES;
        }
        snprintf(text, sizeof(text), "requests %lu spans %lu bytes %lu failed %lu\n",
                 atomic_load(&n_requests), atomic_load(&n_spans), atomic_load(&n_bytes),
                 atomic_load(&n_failed));
        return reply(c, strcmp(url, "/stats") == 0 ? 200 : 404, text);
    }
    if (b == NULL) {
        *req_cls = calloc(1, sizeof(body));
        return MHD_YES;
    }
    if (*upload_size) {
        if (b->len + *upload_size > b->cap) {
            b->cap = (b->len + *upload_size) * 2;
            b->data = realloc(b->data, b->cap);
        }
        memcpy(b->data + b->len, upload, *upload_size);
        b->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    if (delay_ms > 0)
        usleep((useconds_t)delay_ms * 1000);
    unsigned long n = atomic_fetch_add(&n_requests, 1) + 1;
    if (fail_every > 0 && n % (unsigned long)fail_every == 0) {
        atomic_fetch_add(&n_failed, 1);
        return reply(c, 503, "");
    }
    const char *enc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Encoding");
    /* the signal by upstream's paths; anything else is read as traces */
    sf_signal sig = strcmp(url, "/v1/logs") == 0      ? SF_SIGNAL_LOGS
                    : strcmp(url, "/v1/metrics") == 0 ? SF_SIGNAL_METRICS
                                                      : SF_SIGNAL_TRACES;
    atomic_fetch_add(&n_bytes, b->len);
    if (enc != NULL && strcmp(enc, "zstd") == 0) {
        uint8_t *plain;
        size_t plain_len, found = 0;

        if (sf_unzstd(b->data, b->len, (size_t)1 << 30, &plain, &plain_len, NULL) == SF_OK) {
            sf_otlp_scan_signal(sig, plain, plain_len, 64, &found);
            sf_free(plain);
        }
        atomic_fetch_add(&n_spans, found);
    } else {
        atomic_fetch_add(&n_spans, count_spans(sig, b->data, b->len, enc && strcmp(enc, "gzip") == 0));
    }
    return reply(c, 200, "");
}

static void on_done(void *cls, struct MHD_Connection *c, void **req_cls,
                    enum MHD_RequestTerminationCode toe)
{
    body *b = *req_cls;

    (void)cls;
    (void)c;
    (void)toe;
    if (b != NULL && b != (void *)1) {
        free(b->data);
        free(b);
    }
}

int main(int argc, char **argv)
{
    int port = 4319, opt, sig;
    struct MHD_Daemon *d;
    sigset_t sigs;

    while ((opt = getopt(argc, argv, "p:f:d:")) != -1) {
        if (opt == 'p')
            port = atoi(optarg);
        else if (opt == 'f')
            fail_every = atol(optarg);
        else if (opt == 'd')
            delay_ms = atol(optarg);
        else {
            fprintf(stderr, "usage: sf_sink [-p port] [-f fail_every] [-d delay_ms]\n");
            return 2;
        }
    }
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    struct sockaddr_in addr = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION,
                         (uint16_t)port, NULL, NULL, on_request, NULL,
                         MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
                         MHD_OPTION_NOTIFY_COMPLETED, on_done, NULL, MHD_OPTION_END);
    if (d == NULL) {
        fprintf(stderr, "sf_sink: cannot listen on port %d\n", port);
        return 1;
    }
    fprintf(stderr, "sf_sink: listening on 127.0.0.1:%d\n", port);
    sigwait(&sigs, &sig);
    MHD_stop_daemon(d);
    printf("requests %lu spans %lu bytes %lu failed %lu\n", atomic_load(&n_requests),
           atomic_load(&n_spans), atomic_load(&n_bytes), atomic_load(&n_failed));
    return 0;
}
