/* bench/bench_floor.c: what the libraries spanfence is built on cost by
 * themselves, on the benchmark's load, so bench/pipeline.sh can print the
 * floor of the end-to-end figure next to it (measured in the same run).
 *
 *   bench_floor grpc PORT [codec]
 *       A bare gRPC core server for the OTLP Export method, on one thread
 *       and one completion queue: the payload arrives with the call
 *       (GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 8 calls pre-posted, no
 *       flow-control or memory bounds), and the reply is an empty
 *       ExportTraceServiceResponse. With "codec", each message is read
 *       into one buffer and put through the codec with the sample
 *       allowlist (what spanfence does to it), and the result freed. The
 *       driver measures its CPU from /proc; it runs until SIGTERM.
 *   bench_floor post URL REQUESTS [THREADS=2] [SPANS=512] [RATE=0] [gzip]
 *       libcurl, one easy handle per thread, keep-alive: THREADS threads
 *       (as spanfence's sending queue has consumers) POST the sample batch
 *       after the allowlist (the bytes spanfence's otlphttp exporter
 *       sends), REQUESTS in all, and prints the process's CPU per span
 *       and per request. With RATE (requests per second in all), each
 *       thread POSTs on a fixed schedule instead of back to back: the
 *       floor of one POST per incoming call at the engine's call rate;
 *       with "gzip" each body is compressed first (level 1, libdeflate, as
 *       the exporter does), each time. */
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "sample_allowlist.h"
#include "sf_compress.h"
#include "tools/grpc_core.h"

#define EXPORT_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
#define SLOTS 8

typedef struct slot {
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    bool replying;
    int cancelled;
} slot;

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static void post(grpc_server *srv, void *method, grpc_completion_queue *cq, slot *s)
{
    grpc_metadata_array_init(&s->md);
    s->payload = NULL;
    s->replying = false;
    if (grpc_server_request_registered_call(srv, method, &s->call, &s->deadline, &s->md,
                                            &s->payload, cq, cq, s) != GRPC_CALL_OK) {
        fprintf(stderr, "bench_floor: request_registered_call failed\n");
        exit(1);
    }
}

/* What spanfence does to a message: its slices copied into one buffer
 * kept between calls, then the codec. */
static void codec(grpc_byte_buffer *bb)
{
    static uint8_t *rx;
    static size_t rx_cap;
    grpc_byte_buffer_reader r;
    grpc_slice s;
    size_t len = 0;
    sf_buf *out;

    if (!grpc_byte_buffer_reader_init(&r, bb))
        return;
    while (grpc_byte_buffer_reader_next(&r, &s)) {
        size_t n = GRPC_SLICE_LENGTH(s);

        if (len + n > rx_cap) {
            uint8_t *bigger = realloc(rx, (len + n) * 2);

            if (bigger == NULL) {
                fprintf(stderr, "bench_floor: no memory for a %zu-byte request\n", len + n);
                exit(1);
            }
            rx = bigger;
            rx_cap = (len + n) * 2;
        }
        memcpy(rx + len, GRPC_SLICE_START_PTR(s), n);
        len += n;
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&r);
    if (sf_otlp_rewrite(rx, len, SF_OTLP_DEFAULT_MAX_DEPTH, allow_edit, &out, NULL) == SF_OK)
        sf_buf_unref(out);
}

static int serve(const char *port, bool with_codec)
{
    char addr[64];
    grpc_arg arg = { .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH,
                     .value.integer = 64 << 20 };
    grpc_channel_args args = { .num_args = 1, .args = &arg };
    grpc_server_credentials *creds;
    grpc_completion_queue *cq;
    grpc_server *srv;
    void *method;
    slot slots[SLOTS];
    sf_arena *mem = sf_arena_create(16384, 0);

    if (mem == NULL || allowlist_create(mem) != 0)
        return 1;
    /* Request-sized blocks come back from the heap, not fresh mappings (a
     * page fault costs microseconds in a VM). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 64 << 20);
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    sf_grpc_init();
    srv = grpc_server_create(&args, NULL);
    method = grpc_server_register_method(srv, EXPORT_METHOD, NULL,
                                         GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    cq = grpc_completion_queue_create_for_next(NULL);
    grpc_server_register_completion_queue(srv, cq, NULL);
    snprintf(addr, sizeof(addr), "127.0.0.1:%s", port);
    creds = grpc_insecure_server_credentials_create();
    if (grpc_server_add_http2_port(srv, addr, creds) == 0) {
        fprintf(stderr, "bench_floor: cannot listen on %s\n", addr);
        return 1;
    }
    grpc_server_credentials_release(creds);
    grpc_server_start(srv);
    for (int i = 0; i < SLOTS; i++)
        post(srv, method, cq, &slots[i]);
    while (!stop) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                                   gpr_time_from_millis(200, GPR_TIMESPAN)), NULL);
        slot *s = ev.tag;

        if (ev.type != GRPC_OP_COMPLETE)
            continue;
        if (!s->replying) {
            grpc_op ops[4];
            grpc_byte_buffer *resp;
            grpc_slice empty = grpc_empty_slice();

            if (!ev.success) {          /* shutting down */
                grpc_metadata_array_destroy(&s->md);
                continue;
            }
            if (with_codec && s->payload != NULL)
                codec(s->payload);
            grpc_byte_buffer_destroy(s->payload);
            resp = grpc_raw_byte_buffer_create(&empty, 1);
            memset(ops, 0, sizeof(ops));
            ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
            ops[1].op = GRPC_OP_SEND_MESSAGE;
            ops[1].data.send_message.send_message = resp;
            ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
            ops[2].data.send_status_from_server.status = GRPC_STATUS_OK;
            ops[3].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
            ops[3].data.recv_close_on_server.cancelled = &s->cancelled;
            s->replying = true;
            if (grpc_call_start_batch(s->call, ops, 4, s, NULL) != GRPC_CALL_OK) {
                fprintf(stderr, "bench_floor: start_batch failed\n");
                return 1;
            }
            grpc_byte_buffer_destroy(resp);
        } else {
            grpc_call_unref(s->call);
            grpc_metadata_array_destroy(&s->md);
            post(srv, method, cq, s);
        }
    }
    grpc_server_shutdown_and_notify(srv, cq, NULL);
    grpc_server_cancel_all_calls(srv);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_OP_COMPLETE && ev.tag == NULL)
            break;
        if (ev.type == GRPC_OP_COMPLETE && ((slot *)ev.tag)->replying)
            grpc_call_unref(((slot *)ev.tag)->call);
    }
    grpc_server_destroy(srv);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    allowlist_destroy();
    sf_arena_destroy(mem);
    return 0;
}

static size_t discard(char *data, size_t size, size_t n, void *userp)
{
    (void)data, (void)userp;
    return size * n;
}

typedef struct poster {
    pthread_t thread;
    const char *url;
    const sf_buf *body;
    long requests;
    double rate;                /* this thread's requests per second; 0: back to back */
    bool gzip;
    int failed;
} poster;

static void *post_main(void *arg)
{
    poster *p = arg;
    struct curl_slist *h = NULL;
    CURL *c = curl_easy_init();
    sf_compressor *zc = p->gzip ? sf_compressor_create(SF_COMPRESSION_GZIP, 1) : NULL;
    struct timespec start;
    long code = 0;

    clock_gettime(CLOCK_MONOTONIC, &start);
    h = curl_slist_append(h, "Content-Type: application/x-protobuf");
    h = curl_slist_append(h, "Expect:");
    if (p->gzip)
        h = curl_slist_append(h, "Content-Encoding: gzip");
    curl_easy_setopt(c, CURLOPT_URL, p->url);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)p->body->len);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)p->body->data);
    for (long i = 0; i < p->requests; i++) {
        CURLcode rc;

        if (p->rate > 0) {
            struct timespec now;
            double due = (double)i / p->rate, elapsed;

            clock_gettime(CLOCK_MONOTONIC, &now);
            elapsed = (double)(now.tv_sec - start.tv_sec) + (double)(now.tv_nsec - start.tv_nsec) / 1e9;
            if (due > elapsed) {
                double w = due - elapsed;
                struct timespec ts = { (time_t)w, (long)((w - (double)(time_t)w) * 1e9) };

                nanosleep(&ts, NULL);
            }
        }
        if (zc != NULL) {
            const uint8_t *out;
            size_t out_len;

            if (sf_compressor_run(zc, p->body->data, p->body->len, &out, &out_len) != SF_OK) {
                p->failed = 1;
                break;
            }
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)out_len);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, (const char *)out);
        }
        rc = curl_easy_perform(c);

        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        if (rc != CURLE_OK || code < 200 || code >= 300) {
            fprintf(stderr, "bench_floor: POST %s: %s (http %ld)\n", p->url,
                    curl_easy_strerror(rc), code);
            p->failed = 1;
            break;
        }
    }
    curl_easy_cleanup(c);
    curl_slist_free_all(h);
    sf_compressor_destroy(zc);
    return NULL;
}

static double process_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int post_loop(const char *url, long requests, int threads, size_t spans, double rate,
                     bool gzip)
{
    size_t len = 0;
    uint8_t *data = sf_sample_request(spans, 1, &len);
    sf_arena *mem = sf_arena_create(16384, 0);
    poster p[16];
    sf_buf *body;
    double t0, cpu;
    int failed = 0;

    if (threads < 1 || threads > 16 || requests < threads)
        return 2;
    if (data == NULL || mem == NULL || allowlist_create(mem) != 0 ||
        sf_otlp_rewrite(data, len, SF_OTLP_DEFAULT_MAX_DEPTH, allow_edit, &body, NULL) != SF_OK)
        return 1;
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);      /* as spanfence sets it */
    curl_global_init(CURL_GLOBAL_DEFAULT);
    t0 = process_cpu();
    for (int i = 0; i < threads; i++) {
        p[i] = (poster){ .url = url, .body = body, .requests = requests / threads,
                         .rate = rate / threads, .gzip = gzip };
        pthread_create(&p[i].thread, NULL, post_main, &p[i]);
    }
    for (int i = 0; i < threads; i++) {
        pthread_join(p[i].thread, NULL);
        failed |= p[i].failed;
    }
    cpu = process_cpu() - t0;
    requests = requests / threads * threads;
    if (!failed)
        printf("post: %ld requests x %zu spans (%zu B/span), %d threads%s: %.0f ns/span, "
               "%.0f spans/CPU-s, %.1f us/request\n", requests, spans, body->len / spans, threads,
               gzip ? ", gzip" : "", cpu * 1e9 / (double)(requests * (long)spans),
               (double)(requests * (long)spans) / cpu, cpu * 1e6 / (double)requests);
    curl_global_cleanup();
    sf_buf_unref(body);
    allowlist_destroy();
    sf_arena_destroy(mem);
    sf_free(data);
    return failed;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "grpc") == 0)
        return serve(argv[2], argc > 3 && strcmp(argv[3], "codec") == 0);
    if (argc >= 4 && strcmp(argv[1], "post") == 0)
        return post_loop(argv[2], atol(argv[3]), argc > 4 ? atoi(argv[4]) : 2,
                         argc > 5 ? (size_t)atol(argv[5]) : 512, argc > 6 ? atof(argv[6]) : 0,
                         argc > 7 && strcmp(argv[7], "gzip") == 0);
    fprintf(stderr, "usage: bench_floor grpc PORT [codec] | bench_floor post URL REQUESTS "
            "[THREADS] [SPANS] [RATE] [gzip]\n");
    return 2;
}
