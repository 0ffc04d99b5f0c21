/* tools/sf_send.c: sends SGLang-like OTLP/gRPC trace batches to a collector
 * (spanfence or any other): the README's "send a few test spans" and the
 * benchmarks' load generator. Each thread has its own channel (its own TCP
 * connection) and keeps --inflight calls in flight on it (1: one at a time);
 * it prints spans sent and every gRPC status it got back.
 *
 *   sf_send [--endpoint 127.0.0.1:4317] [--spans 512] [--requests 10]
 *           [--threads 1] [--inflight 1] [--gzip] [--lean] [--distinct 16]
 *           [--rate R] [--duration S]
 * --lean sends spans without their text and events (a third of the bytes).
 * With --duration, each thread sends for S seconds (at --rate requests per
 * second when given) instead of a fixed number of requests (each of its
 * calls in flight that many).
 * It prints the answers' latency (p50, p99, max): with --rate from each
 * call's due time on the thread's fixed schedule (call r is due r / rate
 * seconds after the start), so a call held up by a slow answer before it
 * is counted from when it should have gone (no coordinated omission);
 * without --rate from when it was sent.
 *
 *   sf_send --write FILE [--grpc-frame | --json] [--spans 512]
 * writes one such request to FILE instead (with the 5-byte gRPC message
 * prefix when --grpc-frame, as OTLP/JSON when --json), for load tools that
 * send a file's bytes (h2load -d FILE): bench/flood.sh and the flood tests. */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "../bench/sample_batch.h"
#include "grpc_unary.h"
#include "tools/grpc_core.h"
#include "sf_otlp_json.h"

#define EXPORT_METHOD "/opentelemetry.proto.collector.trace.v1.TraceService/Export"

typedef struct opts {
    const char *endpoint;
    long spans, requests, threads, distinct;
    long inflight;              /* calls at once on each connection */
    double rate;                /* requests per second per thread; 0 = as fast as possible */
    double duration;            /* seconds; 0 = stop after --requests */
    bool gzip;
    bool lean;                  /* sf_sample_request_lean: no text, no events */
    const char *write;          /* --write FILE */
    bool grpc_frame;
    bool json;
} opts;

typedef struct thread_ctx {
    const opts *o;
    unsigned index;
    unsigned slot;              /* which of its connection's calls in flight */
    grpc_channel *ch;           /* its connection's, shared by its calls in flight */
    pthread_t tid;
    long status_counts[17];
    char first_why[17][160];    /* the first details of each status */
    long ok_spans;
    long sent_requests;
    double *lat_ms;             /* one per call sent, up to lat_cap */
    size_t n_lat, lat_cap;
} thread_ctx;

static double secs_since(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* A connection of its own (channels with equal args share one). */
static grpc_channel *channel_new(const opts *o)
{
    grpc_arg args[2];
    grpc_channel_args cargs = { .num_args = 0, .args = args };
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch;

    memset(args, 0, sizeof(args));
    args[cargs.num_args].type = GRPC_ARG_INTEGER;
    args[cargs.num_args].key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    args[cargs.num_args++].value.integer = 1;
    if (o->gzip) {
        args[cargs.num_args].type = GRPC_ARG_INTEGER;
        args[cargs.num_args].key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM;
        args[cargs.num_args++].value.integer = GRPC_COMPRESS_GZIP;
    }
    ch = grpc_channel_create(o->endpoint, creds, &cargs);
    grpc_channel_credentials_release(creds);
    return ch;
}

/* One call in flight of a connection's, on that connection's schedule:
 * call r of slot k is due (r + k / inflight) / rate_per_call seconds in. */
static void *sender(void *arg)
{
    thread_ctx *t = arg;
    const opts *o = t->o;
    grpc_channel *ch = t->ch;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);
    grpc_byte_buffer **bufs = calloc((size_t)o->distinct, sizeof(*bufs));
    double rate = o->rate / (double)o->inflight;
    long requests = o->requests / o->inflight + ((long)t->slot < o->requests % o->inflight);

    for (long d = 0; d < o->distinct; d++) {
        size_t len = 0;
        uint8_t *data = (o->lean ? sf_sample_request_lean : sf_sample_request)(
            (size_t)o->spans, (uint64_t)t->index * 1000000u + (uint64_t)d, &len);
        grpc_slice s = grpc_slice_from_copied_buffer((const char *)data, len);
        bufs[d] = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        sf_free(data);
    }
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (long r = 0; o->duration > 0 || r < requests; r++) {
        double elapsed, due;

        clock_gettime(CLOCK_MONOTONIC, &now);
        elapsed = secs_since(&start, &now);
        if (o->duration > 0 && elapsed >= o->duration)
            break;
        due = elapsed;
        if (rate > 0) {
            due = ((double)r + (double)t->slot / (double)o->inflight) / rate;
            if (due > elapsed) {
                double wait = due - elapsed;
                struct timespec ts = { (time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9) };
                nanosleep(&ts, NULL);
            }
        }
        t->sent_requests++;
        /* A byte buffer's slices are moved out when it is sent: send a copy
         * (a ref-counted slice copy, not the bytes). */
        grpc_byte_buffer *copy = grpc_byte_buffer_copy(bufs[r % o->distinct]);
        grpc_status_code st;
        char why[160] = "";

        sf_grpc_unary_why(ch, cq, EXPORT_METHOD, copy, 30, &st, why, sizeof(why));
        grpc_byte_buffer_destroy(copy);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (t->n_lat == t->lat_cap) {
            size_t cap = t->lat_cap ? t->lat_cap * 2 : 4096;
            double *l = realloc(t->lat_ms, cap * sizeof(*l));

            if (l != NULL) {
                t->lat_ms = l;
                t->lat_cap = cap;
            }
        }
        if (t->n_lat < t->lat_cap)
            t->lat_ms[t->n_lat++] = (secs_since(&start, &now) - due) * 1e3;
        if ((unsigned)st < 17 && t->status_counts[st]++ == 0)
            memcpy(t->first_why[st], why, sizeof(why));
        if (st == GRPC_STATUS_OK)
            t->ok_spans += o->spans;
    }
    for (long d = 0; d < o->distinct; d++)
        grpc_byte_buffer_destroy(bufs[d]);
    free(bufs);
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_pluck(cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type
           != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(cq);
    return NULL;
}

/* --write: one request to a file; prints its size and span count. */
static int write_request(const opts *o)
{
    size_t len = 0;
    uint8_t *data = (o->lean ? sf_sample_request_lean : sf_sample_request)((size_t)o->spans, 1, &len);
    uint8_t prefix[5] = { 0, (uint8_t)(len >> 24), (uint8_t)(len >> 16), (uint8_t)(len >> 8),
                          (uint8_t)len };
    FILE *f = fopen(o->write, "wb");
    bool ok;

    if (data != NULL && o->json) {
        sf_otlp_request *tree =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                NULL, len, data);
        char *json = NULL;

        sf_free(data);
        data = NULL;
        if (tree != NULL && sf_otlp_json_encode(tree, &json, &len) == SF_OK)
            data = (uint8_t *)json;
        if (tree != NULL)
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
                tree, NULL);
    }
    if (data == NULL || f == NULL) {
        perror(o->write);
        sf_free(data);
        if (f != NULL)
            fclose(f);
        return 1;
    }
    ok = (!o->grpc_frame || fwrite(prefix, 1, 5, f) == 5) && fwrite(data, 1, len, f) == len;
    ok = fclose(f) == 0 && ok;
    sf_free(data);
    if (!ok) {
        perror(o->write);
        return 1;
    }
    printf("%s: %zu bytes, %ld spans\n", o->write, len + (o->grpc_frame ? 5 : 0), o->spans);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option lopts[] = {
        { "endpoint", required_argument, NULL, 'e' }, { "spans", required_argument, NULL, 's' },
        { "requests", required_argument, NULL, 'n' }, { "threads", required_argument, NULL, 't' },
        { "distinct", required_argument, NULL, 'd' }, { "gzip", no_argument, NULL, 'z' },
        { "rate", required_argument, NULL, 'r' }, { "duration", required_argument, NULL, 'D' },
        { "write", required_argument, NULL, 'w' }, { "grpc-frame", no_argument, NULL, 'g' },
        { "json", no_argument, NULL, 'j' }, { "inflight", required_argument, NULL, 'i' },
        { "lean", no_argument, NULL, 'l' },
        { "help", no_argument, NULL, 'h' }, { NULL, 0, NULL, 0 },
    };
    opts o = { .endpoint = "127.0.0.1:4317", .spans = 512, .requests = 10, .threads = 1,
               .distinct = 16, .inflight = 1 };
    thread_ctx *ts;
    grpc_channel **chans;
    long n_ts;
    long counts[17] = { 0 }, ok_spans = 0, total = 0, sent = 0;
    double *lat = NULL;
    size_t n_lat = 0;
    struct timespec t0, t1;
    double secs;
    int opt;

    while ((opt = getopt_long(argc, argv, "e:s:n:t:d:zr:D:w:gji:lh", lopts, NULL)) != -1) {
        switch (opt) {
        case 'e': o.endpoint = optarg; break;
        case 's': o.spans = atol(optarg); break;
        case 'n': o.requests = atol(optarg); break;
        case 't': o.threads = atol(optarg); break;
        case 'd': o.distinct = atol(optarg); break;
        case 'z': o.gzip = true; break;
        case 'r': o.rate = atof(optarg); break;
        case 'D': o.duration = atof(optarg); break;
        case 'w': o.write = optarg; break;
        case 'g': o.grpc_frame = true; break;
        case 'j': o.json = true; break;
        case 'i': o.inflight = atol(optarg); break;
        case 'l': o.lean = true; break;
        default:
            fprintf(opt == 'h' ? stdout : stderr,
                    "usage: sf_send [--endpoint HOST:PORT] [--spans N] [--requests N] "
                    "[--threads N] [--inflight N] [--distinct N] [--gzip] [--lean] [--rate R] "
                    "[--duration S]\n"
                    "       sf_send --write FILE [--grpc-frame | --json] [--spans N]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (o.spans < 0 || o.requests < 1 || o.threads < 1 || o.distinct < 1 || o.inflight < 1) {
        fputs("sf_send: --spans >= 0, --requests, --threads, --inflight, --distinct >= 1\n",
              stderr);
        return 2;
    }
    if (o.write != NULL && o.json && o.grpc_frame) {
        fputs("sf_send: --json and --grpc-frame do not go together\n", stderr);
        return 2;
    }
    if (o.write != NULL)
        return write_request(&o);
    grpc_init();
    n_ts = o.threads * o.inflight;
    ts = calloc((size_t)n_ts, sizeof(*ts));
    chans = calloc((size_t)o.threads, sizeof(*chans));
    for (long i = 0; i < o.threads; i++)
        chans[i] = channel_new(&o);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n_ts; i++) {
        ts[i].o = &o;
        ts[i].index = (unsigned)i;
        ts[i].slot = (unsigned)(i % o.inflight);
        ts[i].ch = chans[i / o.inflight];
        pthread_create(&ts[i].tid, NULL, sender, &ts[i]);
    }
    for (long i = 0; i < n_ts; i++) {
        pthread_join(ts[i].tid, NULL);
        for (int c = 0; c < 17; c++)
            counts[c] += ts[i].status_counts[c];
        ok_spans += ts[i].ok_spans;
        sent += ts[i].sent_requests;
        n_lat += ts[i].n_lat;
    }
    lat = malloc((n_lat ? n_lat : 1) * sizeof(*lat));
    n_lat = 0;
    for (long i = 0; i < n_ts && lat != NULL; i++) {
        memcpy(lat + n_lat, ts[i].lat_ms, ts[i].n_lat * sizeof(*lat));
        n_lat += ts[i].n_lat;
    }
    for (long i = 0; i < n_ts; i++)
        free(ts[i].lat_ms);
    for (long i = 0; i < o.threads; i++)
        grpc_channel_destroy(chans[i]);
    free(chans);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    printf("requests: %ld, spans sent: %ld, spans accepted: %ld, seconds: %.3f, spans/s: %.0f\n",
           sent, sent * o.spans, ok_spans, secs, secs > 0 ? (double)ok_spans / secs : 0.0);
    if (lat != NULL && n_lat > 0) {
        qsort(lat, n_lat, sizeof(*lat), cmp_double);
        printf("answer latency ms (from each call's %s): p50 %.3f p99 %.3f max %.3f\n",
               o.rate > 0 ? "due time" : "send", lat[(n_lat - 1) / 2],
               lat[(size_t)((double)(n_lat - 1) * 0.99)], lat[n_lat - 1]);
    }
    free(lat);
    /* For each status other than OK: on how many connections,
     * and the first details one of them got (who made the status: the
     * server's message, or gRPC core's for a connection it lost). */
    for (int c = 0; c < 17; c++) {
        const char *first = NULL;
        long conns = 0;

        if (!counts[c])
            continue;
        total += counts[c];
        for (long i = 0; i < o.threads; i++) {
            bool got = false;

            for (long k = i * o.inflight; k < (i + 1) * o.inflight; k++) {
                if (ts[k].status_counts[c] == 0)
                    continue;
                got = true;
                if (first == NULL)
                    first = ts[k].first_why[c];
            }
            conns += got;
        }
        if (c == GRPC_STATUS_OK)
            printf("  %s: %ld\n", sf_grpc_status_name(c), counts[c]);
        else
            printf("  %s: %ld (on %ld of %ld connections; first: \"%s\")\n",
                   sf_grpc_status_name(c), counts[c], conns, o.threads, first ? first : "");
    }
    free(ts);
    grpc_shutdown();
    return counts[GRPC_STATUS_OK] == total ? 0 : 1;
}
