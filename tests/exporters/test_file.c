/* tests/exporters/test_file.c: the `file` exporter writing into a fresh
 * temporary directory and read back independently: OTLP/JSON lines decoded
 * back to the exact requests sent, length-prefixed protobuf unpacked by
 * protobuf-c, gzip files inflated member by member (each rotated segment a
 * complete stream), rotation by size and by line count with max_backups,
 * everything written at shutdown, the live gzip file readable after a
 * flush, a full queue, write errors (/dev/full), permissions and append,
 * and the config checks through the real loader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "tests/sf_torture.h"

#include "tests/sf_test.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "exporters/file/file.h"
#include "internal/sf_core.h"
#include "sf_otlp_json.h"
#include "sf_otlp_count.h"

extern const sf_component_type sf_file_exporter_type;

/* ---- requests ------------------------------------------------------------ */

/* One packed request of `n` spans tagged `tag` (first span-id byte and an
 * attribute), with a `pad`-byte string attribute to control its size. */
typedef struct packed {
    uint8_t *data;
    size_t len;
    size_t spans;
} packed;

static packed make_request(int tag, size_t n, size_t pad)
{
    sf_otlp_request req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    sf_otlp_resource_spans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    sf_otlp_resource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    sf_otlp_scope_spans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    sf_otlp_kv kv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT, *kvp = &kv;
    sf_otlp_any av = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sf_otlp_kv pkv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    sf_otlp_any pav = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    sf_otlp_kv *span_kvs[2] = { &kv, &pkv };
    sf_otlp_resource_spans *rsp = &rs;
    sf_otlp_scope_spans *ssp = &ss;
    sf_otlp_span spans[8], *sp[8];
    uint8_t trace_id[16] = { 0xab, 0xcd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01 };
    uint8_t span_ids[8][8];
    char *padding = malloc(pad + 1);
    packed p;

    assert_true(n <= 8);
    memset(padding, 'x', pad);
    padding[pad] = '\0';
    av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
    av.int_value = tag;
    kv.key = "tag";
    kv.value = &av;
    pav.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    pav.string_value = padding;
    pkv.key = "pad";
    pkv.value = &pav;
    res.n_attributes = 1;
    res.attributes = &kvp;
    for (size_t i = 0; i < n; i++) {
        sf_otlp_span init = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;

        memset(span_ids[i], (int)i + 1, 8);
        span_ids[i][0] = (uint8_t)tag;
        spans[i] = init;
        spans[i].trace_id = (ProtobufCBinaryData){ 16, trace_id };
        spans[i].span_id = (ProtobufCBinaryData){ 8, span_ids[i] };
        spans[i].name = "llm.generate";
        spans[i].kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
        spans[i].start_time_unix_nano = 1700000000000000000ull + i;
        spans[i].end_time_unix_nano = 1700000000500000000ull + i;
        spans[i].n_attributes = pad > 0 && i == 0 ? 2 : 1;
        spans[i].attributes = span_kvs;
        sp[i] = &spans[i];
    }
    ss.n_spans = n;
    ss.spans = sp;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    p.len = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(&req);
    p.data = malloc(p.len);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req, p.data);
    p.spans = n;
    free(padding);
    return p;
}

/* ---- fixture ----------------------------------------------------------------- */

#define MAX_SENT 32

typedef struct fixture {
    char dir[64];
    char path[128];
    sf_file_config cfg;
    struct sf_component comp;
    bool created;
    sf_arena *arena;
    packed sent[MAX_SENT];      /* what consume() accepted, in order */
    size_t n_sent;
    uint64_t spans_sent;
} fixture;

static int setup(void **state)
{
    fixture *x = calloc(1, sizeof(*x));

    strcpy(x->dir, "/tmp/sf_file_test_XXXXXX");
    assert_non_null(mkdtemp(x->dir));
    snprintf(x->path, sizeof(x->path), "%s/spans.json", x->dir);
    x->cfg = (sf_file_config){
        .path = x->path,
        .format = SF_FILE_FORMAT_JSON,
        .compression = SF_FILE_COMPRESSION_NONE,
        .flush_interval = 1000,
        .rotation = { .present = false, .max_megabytes = 100, .max_backups = 100 },
        .queue_size = 64,
    };
    x->comp.type = &sf_file_exporter_type;
    x->comp.id = "file/capture";
    x->comp.config = &x->cfg;
    x->arena = sf_arena_create(1 << 16, 0);
    assert_non_null(x->arena);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fixture *x = *state;
    DIR *d;
    struct dirent *e;

    if (x->created)
        x->comp.type->destroy(&x->comp);
    for (size_t i = 0; i < x->n_sent; i++)
        free(x->sent[i].data);
    sf_arena_destroy(x->arena);
    d = opendir(x->dir);
    while (d != NULL && (e = readdir(d)) != NULL) {
        char p[512];

        if (e->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", x->dir, e->d_name);
        unlink(p);
    }
    if (d != NULL)
        closedir(d);
    rmdir(x->dir);
    free(x);
    return 0;
}

static void create(fixture *x)
{
    assert_int_equal(x->comp.type->create(&x->comp, &x->cfg), SF_OK);
    x->created = true;
}

static void create_and_start(fixture *x)
{
    create(x);
    assert_int_equal(x->comp.type->start(&x->comp), SF_OK);
}

/* Hand one request to the exporter as the pipeline would (a batch over
 * the received bytes); remember it when accepted. */
static sf_status consume_request(fixture *x, int tag, size_t spans, size_t pad)
{
    packed p = make_request(tag, spans, pad);
    sf_request b;
    sf_status st;

    assert_int_equal(sf_request_init(&b, x->arena, p.data, p.len, SF_OTLP_DEFAULT_MAX_DEPTH),
                     SF_OK);
    /* what the core does before any exporter sees a batch */
    assert_int_equal(sf_request_rewrite(&b, NULL, NULL), SF_OK);
    st = x->comp.type->consume(&x->comp, &b);
    sf_request_release(&b);
    sf_arena_reset(x->arena);
    if (st == SF_OK) {
        assert_true(x->n_sent < MAX_SENT);
        x->sent[x->n_sent++] = p;
        x->spans_sent += spans;
    } else {
        free(p.data);
    }
    return st;
}

static void shutdown_exporter(fixture *x)
{
    x->comp.type->shutdown(&x->comp);
}

static uint64_t counter(_Atomic uint64_t *c)
{
    return sf_counter_get(c);
}

/* ---- reading back -------------------------------------------------------------- */

static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* Inflate a whole .gz file, member after member; fails the test unless
 * every member ends properly and nothing follows the last one. */
static uint8_t *gunzip_complete(const char *path, size_t *out_len)
{
    size_t in_len, cap = 1 << 20, n = 0;
    uint8_t *in = read_all(path, &in_len), *out = malloc(cap);
    size_t pos = 0;

    assert_true(in_len > 0);
    while (pos < in_len) {
        z_stream z;
        int rc;

        memset(&z, 0, sizeof(z));
        assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
        z.next_in = in + pos;
        z.avail_in = (uInt)(in_len - pos);
        do {
            if (cap - n < 65536) {
                cap *= 2;
                out = realloc(out, cap);
            }
            z.next_out = out + n;
            z.avail_out = (uInt)(cap - n);
            rc = inflate(&z, Z_NO_FLUSH);
            n = cap - z.avail_out;
        } while (rc == Z_OK);
        assert_int_equal(rc, Z_STREAM_END);
        pos = in_len - z.avail_in;
        inflateEnd(&z);
    }
    free(in);
    *out_len = n;
    out[n] = 0;
    return out;
}

/* The same through zlib's gzopen/gzread, as a reader of the file would. */
static size_t gzread_all(const char *path, char *out, size_t cap)
{
    gzFile g = gzopen(path, "rb");
    int errnum, r;
    size_t n = 0;

    assert_non_null(g);
    while ((r = gzread(g, out + n, (unsigned)(cap - n))) > 0)
        n += (size_t)r;
    assert_int_equal(r, 0);
    gzerror(g, &errnum);
    assert_int_equal(errnum, Z_OK);
    assert_int_equal(gzclose(g), Z_OK);
    return n;
}

/* JSON lines: each decodes to exactly sent[first + i]. Returns lines. */
static size_t check_json_lines(fixture *x, const char *text, size_t len, size_t first)
{
    size_t lines = 0;
    const char *p = text, *end = text + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        sf_arena *a = sf_arena_create(1 << 16, 0);
        sf_otlp_request *req = NULL;
        char err[256] = "";
        uint8_t *repacked;
        size_t rlen;
        packed *want;

        assert_non_null(nl);    /* every line is complete */
        assert_true(first + lines < x->n_sent);
        want = &x->sent[first + lines];
        assert_int_equal(sf_otlp_json_decode(a, p, (size_t)(nl - p), 32, &req, err, sizeof(err)),
                         SF_OK);
        rlen = opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(req);
        repacked = malloc(rlen);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, repacked);
        assert_int_equal(rlen, want->len);
        assert_memory_equal(repacked, want->data, rlen);
        free(repacked);
        sf_arena_destroy(a);
        lines++;
        p = nl + 1;
    }
    return lines;
}

/* Length-prefixed protobuf: each record unpacks and repacks to exactly
 * sent[first + i]. Returns records. */
static size_t check_proto_records(fixture *x, const uint8_t *data, size_t len, size_t first)
{
    size_t pos = 0, n = 0;

    while (pos < len) {
        uint32_t rlen;
        sf_otlp_request *req;
        uint8_t *repacked;
        packed *want;

        assert_true(len - pos >= 4);
        rlen = (uint32_t)data[pos] << 24 | (uint32_t)data[pos + 1] << 16 |
               (uint32_t)data[pos + 2] << 8 | data[pos + 3];
        pos += 4;
        assert_true(rlen <= len - pos);
        assert_true(first + n < x->n_sent);
        want = &x->sent[first + n];
        req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
            NULL, rlen, data + pos);
        assert_non_null(req);
        assert_int_equal(sf_otlp_count_spans(req), want->spans);
        repacked = malloc(rlen);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(req, repacked);
        assert_int_equal(rlen, want->len);
        assert_memory_equal(repacked, want->data, rlen);
        free(repacked);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            req, NULL);
        pos += rlen;
        n++;
    }
    return n;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in x->dir other than the live file, sorted. */
static size_t list_backups(fixture *x, char names[][256], size_t max)
{
    DIR *d = opendir(x->dir);
    struct dirent *e;
    char *ptrs[64];
    char tmp[64][256];
    size_t n = 0;
    const char *live = strrchr(x->path, '/') + 1;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, live) == 0)
            continue;
        assert_true(n < 64);
        snprintf(tmp[n], sizeof(tmp[n]), "%s", e->d_name);
        ptrs[n] = tmp[n];
        n++;
    }
    closedir(d);
    qsort(ptrs, n, sizeof(*ptrs), cmp_str);
    assert_true(n <= max);
    for (size_t i = 0; i < n; i++)
        snprintf(names[i], 256, "%s", ptrs[i]);
    return n;
}

/* "spans-2026-01-31T12-00-00.123.json" for prefix "spans", ext ".json" */
static void assert_backup_name(const char *name, const char *prefix, const char *ext)
{
    size_t np = strlen(prefix), ne = strlen(ext);
    const char *pattern = "-dddd-dd-ddTdd-dd-dd.ddd";

    assert_int_equal(strlen(name), np + 24 + ne);
    assert_memory_equal(name, prefix, np);
    assert_string_equal(name + np + 24, ext);
    for (size_t i = 0; i < 24; i++) {
        if (pattern[i] == 'd')
            assert_true(name[np + i] >= '0' && name[np + i] <= '9');
        else
            assert_int_equal(name[np + i], pattern[i]);
    }
}

static void assert_drained(fixture *x)
{
    sf_counters *k = &x->comp.counters;

    assert_int_equal(atomic_load(&k->queued_spans), 0);
    assert_int_equal(atomic_load(&k->queue_size), 0);
    assert_int_equal(counter(&k->sent_spans), x->spans_sent);
    for (int r = 0; r < SF_REASON_COUNT; r++)
        assert_int_equal(counter(&k->send_failed_spans[r]), 0);
}

/* ---- tests -------------------------------------------------------------------- */

static void test_json_lines_decode_back(void **state)
{
    fixture *x = *state;
    size_t len;
    uint8_t *data;
    struct stat st;

    create_and_start(x);
    assert_int_equal(atomic_load(&x->comp.counters.queue_capacity), 64);
    assert_int_equal(consume_request(x, 1, 3, 0), SF_OK);
    assert_int_equal(consume_request(x, 2, 1, 0), SF_OK);
    assert_int_equal(consume_request(x, 3, 8, 10), SF_OK);
    shutdown_exporter(x);
    data = read_all(x->path, &len);
    assert_int_equal(check_json_lines(x, (char *)data, len, 0), 3);
    assert_non_null(strstr((char *)data, "\"name\":\"llm.generate\""));
    free(data);
    assert_drained(x);
    assert_int_equal(x->spans_sent, 12);
    assert_int_equal(stat(x->path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
}

static void test_proto_length_delimited(void **state)
{
    fixture *x = *state;
    size_t len;
    uint8_t *data;

    snprintf(x->path, sizeof(x->path), "%s/spans.bin", x->dir);
    x->cfg.format = SF_FILE_FORMAT_PROTO;
    create_and_start(x);
    for (int i = 0; i < 5; i++)
        assert_int_equal(consume_request(x, 10 + i, (size_t)i + 1, (size_t)i * 100), SF_OK);
    shutdown_exporter(x);
    data = read_all(x->path, &len);
    assert_int_equal(check_proto_records(x, data, len, 0), 5);
    free(data);
    assert_drained(x);
}

/* max_lines 2, five requests: two complete .gz backups of two lines each
 * and a live file of one, all readable with gzread. */
static void test_gzip_rotation_by_lines(void **state)
{
    fixture *x = *state;
    char names[8][256], full[512];
    size_t n, len, total = 0;
    uint8_t *text;
    static char via_gzread[1 << 16];

    snprintf(x->path, sizeof(x->path), "%s/spans.json.gz", x->dir);
    x->cfg.compression = SF_FILE_COMPRESSION_GZIP;
    x->cfg.max_lines = 2;
    create_and_start(x);
    for (int i = 0; i < 5; i++)
        assert_int_equal(consume_request(x, 20 + i, 2, 0), SF_OK);
    shutdown_exporter(x);
    assert_drained(x);

    n = list_backups(x, names, 8);
    assert_int_equal(n, 2);
    for (size_t i = 0; i < n; i++) {
        assert_backup_name(names[i], "spans.json", ".gz");
        snprintf(full, sizeof(full), "%s/%s", x->dir, names[i]);
        text = gunzip_complete(full, &len);
        assert_int_equal(check_json_lines(x, (char *)text, len, total), 2);
        assert_int_equal(gzread_all(full, via_gzread, sizeof(via_gzread)), len);
        assert_memory_equal(via_gzread, text, len);
        free(text);
        total += 2;
    }
    text = gunzip_complete(x->path, &len);
    assert_int_equal(check_json_lines(x, (char *)text, len, total), 1);
    assert_int_equal(gzread_all(x->path, via_gzread, sizeof(via_gzread)), len);
    free(text);
}

/* Records of ~400 KB against max_megabytes 1: two fit per file. Ten
 * records make four rotations; max_backups 2 keeps the newest two, and
 * files that are not backups of this path are left alone. */
static void test_rotation_by_size_keeps_max_backups(void **state)
{
    fixture *x = *state;
    char names[8][256], full[512];
    static const char *const others[] = { "other.txt", "spans-notastamp.bin",
                                          "spans-2020-01-01T00-00-00.000.json" };
    size_t n, len;
    uint8_t *data;

    snprintf(x->path, sizeof(x->path), "%s/spans.bin", x->dir);
    x->cfg.format = SF_FILE_FORMAT_PROTO;
    x->cfg.rotation = (sf_file_rotation_config){ .present = true, .max_megabytes = 1,
                                                  .max_backups = 2 };
    for (size_t i = 0; i < 3; i++) {
        snprintf(full, sizeof(full), "%s/%s", x->dir, others[i]);
        fclose(fopen(full, "w"));
    }
    create_and_start(x);
    for (int i = 0; i < 10; i++)
        assert_int_equal(consume_request(x, 30 + i, 1, 400000), SF_OK);
    shutdown_exporter(x);
    assert_drained(x);

    n = list_backups(x, names, 8);
    assert_int_equal(n, 5);     /* two backups and the three others */
    assert_string_equal(names[0], "other.txt");
    assert_string_equal(names[1], "spans-2020-01-01T00-00-00.000.json");
    assert_backup_name(names[2], "spans", ".bin");
    assert_backup_name(names[3], "spans", ".bin");
    assert_true(strcmp(names[2], names[3]) < 0);
    assert_string_equal(names[4], "spans-notastamp.bin");
    /* the newest backups hold records 4-5 and 6-7, the live file 8-9 */
    for (size_t i = 0; i < 2; i++) {
        snprintf(full, sizeof(full), "%s/%s", x->dir, names[2 + i]);
        data = read_all(full, &len);
        assert_true(len <= 1 << 20);
        assert_int_equal(check_proto_records(x, data, len, 4 + 2 * i), 2);
        free(data);
    }
    data = read_all(x->path, &len);
    assert_int_equal(check_proto_records(x, data, len, 8), 2);
    free(data);
}

/* A long flush interval: everything queued still reaches the file, and
 * the gzip stream is complete, when shutdown comes first. */
static void test_shutdown_writes_everything(void **state)
{
    fixture *x = *state;
    size_t len;
    uint8_t *text;

    snprintf(x->path, sizeof(x->path), "%s/spans.json.gz", x->dir);
    x->cfg.compression = SF_FILE_COMPRESSION_GZIP;
    x->cfg.flush_interval = 3600000;
    create_and_start(x);
    for (int i = 0; i < 20; i++)
        assert_int_equal(consume_request(x, 40 + i, 3, 50), SF_OK);
    shutdown_exporter(x);
    assert_drained(x);
    text = gunzip_complete(x->path, &len);
    assert_int_equal(check_json_lines(x, (char *)text, len, 0), 20);
    free(text);
    /* after shutdown nothing more is taken */
    assert_int_equal(consume_request(x, 99, 1, 0), SF_STOPPED);
}

/* While running, a flush makes the live gzip file readable up to the last
 * whole line, and only then are its spans counted as sent. */
static void test_gzip_live_file_readable_after_flush(void **state)
{
    fixture *x = *state;
    uint8_t *in, out[1 << 16];
    size_t in_len;
    z_stream z;
    int rc;

    snprintf(x->path, sizeof(x->path), "%s/live.json.gz", x->dir);
    x->cfg.compression = SF_FILE_COMPRESSION_GZIP;
    x->cfg.flush_interval = 20;
    create_and_start(x);
    assert_int_equal(consume_request(x, 50, 2, 0), SF_OK);
    SF_TEST_WAIT_FOR(counter(&x->comp.counters.sent_spans) == 2);
    assert_int_equal(atomic_load(&x->comp.counters.queued_spans), 0);

    in = read_all(x->path, &in_len);
    memset(&z, 0, sizeof(z));
    assert_int_equal(inflateInit2(&z, 15 + 16), Z_OK);
    z.next_in = in;
    z.avail_in = (uInt)in_len;
    z.next_out = out;
    z.avail_out = sizeof(out);
    rc = inflate(&z, Z_SYNC_FLUSH);
    assert_true(rc == Z_OK || rc == Z_BUF_ERROR);   /* no end yet: the member is open */
    assert_int_equal(z.avail_in, 0);
    assert_int_equal(check_json_lines(x, (char *)out, z.total_out, 0), 1);
    inflateEnd(&z);
    free(in);
    shutdown_exporter(x);
    assert_drained(x);
}

/* Without a running writer the queue fills: the third request is refused
 * with SF_FULL and counted; what was queued is dropped at shutdown. */
static void test_queue_full(void **state)
{
    fixture *x = *state;
    sf_counters *k = &x->comp.counters;

    x->cfg.queue_size = 2;
    create(x);
    assert_int_equal(atomic_load(&k->queue_capacity), 2);
    assert_int_equal(consume_request(x, 60, 3, 0), SF_OK);
    assert_int_equal(consume_request(x, 61, 4, 0), SF_OK);
    assert_int_equal(consume_request(x, 62, 5, 0), SF_FULL);
    assert_int_equal(counter(&k->enqueue_failed_spans), 5);
    assert_int_equal(atomic_load(&k->queue_size), 2);
    assert_int_equal(atomic_load(&k->queued_spans), 7);
    shutdown_exporter(x);
    assert_int_equal(counter(&k->send_failed_spans[SF_REASON_SHUTDOWN]), 7);
    assert_int_equal(atomic_load(&k->queued_spans), 0);
    assert_int_equal(atomic_load(&k->queue_size), 0);
    assert_int_equal(counter(&k->sent_spans), 0);
}

/* /dev/full: every write fails with ENOSPC; spans are counted as
 * permanent failures and the error is logged once for the streak. */
static void test_write_errors_counted_and_logged_once(void **state)
{
    fixture *x = *state;
    sf_counters *k = &x->comp.counters;
    char logpath[] = "/tmp/sf_file_log_XXXXXX";
    int fd = mkstemp(logpath), saved = dup(STDERR_FILENO);
    char *log, *p;
    size_t len;
    int lines = 0;

    snprintf(x->path, sizeof(x->path), "/dev/full");
    x->cfg.format = SF_FILE_FORMAT_PROTO;
    x->cfg.max_lines = 1;       /* not a regular file: never rotated */
    dup2(fd, STDERR_FILENO);
    sf_log_set_level(SF_LOG_INFO);
    create_and_start(x);
    assert_int_equal(consume_request(x, 70, 2, 0), SF_OK);
    assert_int_equal(consume_request(x, 71, 3, 0), SF_OK);
    shutdown_exporter(x);
    sf_log_set_level(SF_LOG_OFF);
    dup2(saved, STDERR_FILENO);
    close(saved);
    close(fd);

    assert_int_equal(counter(&k->send_failed_spans[SF_REASON_PERMANENT_ERROR]), 5);
    assert_int_equal(counter(&k->sent_spans), 0);
    assert_int_equal(atomic_load(&k->queued_spans), 0);
    log = (char *)read_all(logpath, &len);
    unlink(logpath);
    for (p = log; (p = strstr(p, "cannot write '/dev/full'")) != NULL; p++)
        lines++;
    assert_int_equal(lines, 1);
    assert_non_null(strstr(log, "exporter file/capture: cannot write '/dev/full': No space left "
                                "on device; dropping spans until it works again"));
    free(log);
}

/* An existing file keeps its content with append, is truncated without;
 * either way it ends up 0600. */
static void test_append_truncate_and_mode(void **state)
{
    fixture *x = *state;
    size_t len;
    uint8_t *data;

    for (int append = 0; append <= 1; append++) {
        FILE *f = fopen(x->path, "w");

        fputs("old\n", f);
        fclose(f);
        assert_int_equal(chmod(x->path, 0644), 0);
        x->cfg.append = append;
        create_and_start(x);
        assert_int_equal(consume_request(x, 80 + append, 1, 0), SF_OK);
        shutdown_exporter(x);
        x->comp.type->destroy(&x->comp);
        x->created = false;
        data = read_all(x->path, &len);
        if (append) {
            assert_memory_equal(data, "old\n", 4);
            assert_int_equal(check_json_lines(x, (char *)data + 4, len - 4, x->n_sent - 1), 1);
        } else {
            assert_int_equal(check_json_lines(x, (char *)data, len, x->n_sent - 1), 1);
        }
        free(data);
        {
            struct stat st;

            assert_int_equal(stat(x->path, &st), 0);
            assert_int_equal(st.st_mode & 07777, 0600);
        }
    }
}

/* start fails with SF_IO (and a message) when the file cannot be opened. */
static void test_start_fails_on_unwritable_path(void **state)
{
    fixture *x = *state;

    snprintf(x->path, sizeof(x->path), "%s/missing/spans.json", x->dir);
    create(x);
    assert_int_equal(x->comp.type->start(&x->comp), SF_IO);
}

static void test_create_survives_allocation_failure(void **state)
{
    fixture *x = *state;

    assert_true(sf_torture_create(&x->comp, &x->cfg, false) >= 1);
}

/* ---- config checks through the loader ----------------------------------------- */

static const char *load_exporter(const char *exporter_yaml)
{
    return sf_test_load_exporter("file/cap", exporter_yaml);
}

static void test_check_config(void **state)
{
    (void)state;
    assert_string_equal(load_exporter("    path: /tmp/spans.json\n"), "");
    assert_string_equal(load_exporter("    path: spans.json\n"
                                      "    format: proto\n"
                                      "    compression: gzip\n"
                                      "    flush_interval: 250ms\n"
                                      "    max_lines: 1000\n"
                                      "    append: true\n"
                                      "    queue_size: 8\n"
                                      "    rotation:\n"
                                      "      max_megabytes: 10\n"
                                      "      max_backups: 3\n"), "");
    assert_string_equal(load_exporter("    format: json\n"),
                        "x.yaml:6:3: exporters.file/cap: 'path' is required\n");
    assert_string_equal(load_exporter("    path: /nonexistent-dir/spans.json\n"),
                        "x.yaml:7:11: exporters.file/cap.path: directory '/nonexistent-dir' "
                        "does not exist\n");
    assert_string_equal(load_exporter("    path: /etc/passwd/spans.json\n"),
                        "x.yaml:7:11: exporters.file/cap.path: '/etc/passwd' is not a "
                        "directory\n");
    assert_string_equal(load_exporter("    path: /tmp\n"),
                        "x.yaml:7:11: exporters.file/cap.path: '/tmp' is a directory\n");
    assert_string_equal(load_exporter("    path: /tmp/x.json\n"
                                      "    compression: zstd\n"),
                        "x.yaml:8:18: exporters.file/cap.compression: 'zstd' is not supported "
                        "by spanfence (use one of 'none', 'gzip')\n");
    assert_string_equal(load_exporter("    path: /tmp/x.json\n"
                                      "    rotation:\n"
                                      "      max_days: 3\n"
                                      "      localtime: true\n"),
                        "x.yaml:9:7: exporters.file/cap.rotation.max_days: warning: 'max_days' "
                        "has no effect in spanfence\n"
                        "x.yaml:10:18: exporters.file/cap.rotation.localtime: warning: "
                        "'localtime' is ignored: rotated file names use UTC\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_json_lines_decode_back, setup, teardown),
        cmocka_unit_test_setup_teardown(test_proto_length_delimited, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gzip_rotation_by_lines, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation_by_size_keeps_max_backups, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_writes_everything, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gzip_live_file_readable_after_flush, setup, teardown),
        cmocka_unit_test_setup_teardown(test_queue_full, setup, teardown),
        cmocka_unit_test_setup_teardown(test_write_errors_counted_and_logged_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_append_truncate_and_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_fails_on_unwritable_path, setup, teardown),
        cmocka_unit_test_setup_teardown(test_create_survives_allocation_failure, setup, teardown),
        cmocka_unit_test(test_check_config),
    };

    sf_log_set_level(SF_LOG_OFF);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
