/* receivers/journald/journald_record.c: journal entries into one OTLP
 * ExportLogsServiceRequest. A record's body is MESSAGE as a string (valid
 * UTF-8, bounded), its severity from PRIORITY as upstream's journald input
 * maps it, its time from __REALTIME_TIMESTAMP, and three fields as
 * attributes: _SYSTEMD_UNIT, SYSLOG_IDENTIFIER and _PID. Nothing else of
 * the entry is read: upstream puts the whole entry (command lines, paths,
 * every field a program logged) in a map body; spanfence is a fence.
 *
 * The tree lives in the caller's arena; encoding packs it once. */
#include "journald.h"

#include <string.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"

typedef Opentelemetry__Proto__Logs__V1__LogRecord log_record;
typedef Opentelemetry__Proto__Common__V1__KeyValue key_value;
typedef Opentelemetry__Proto__Common__V1__AnyValue any_value;

struct sf_jd_builder {
    sf_arena *arena;
    size_t max_records;
    size_t max_message;
    size_t n;
    size_t bytes;
    log_record **records;       /* max_records, in the arena */
};

/* upstream (pkg/stanza journald): emerg fatal, alert error3, crit error2,
 * err error, warning warn, notice info2, info info, debug debug */
static const struct {
    int number;
    const char *text;
} severities[8] = {
    { 21, "fatal" }, { 19, "error3" }, { 18, "error2" }, { 17, "error" },
    { 13, "warn" }, { 10, "info2" }, { 9, "info" }, { 5, "debug" },
};

bool sf_jd_severity(const uint8_t *p, size_t n, int *number, const char **text)
{
    if (p == NULL || n != 1 || p[0] < '0' || p[0] > '7')
        return false;
    *number = severities[p[0] - '0'].number;
    *text = severities[p[0] - '0'].text;
    return true;
}

/* The length of the valid UTF-8 sequence at in[0, n) (1 to 4), or 0. */
static size_t utf8_seq(const uint8_t *in, size_t n)
{
    uint8_t c = in[0];
    size_t len;
    uint8_t lo = 0x80, hi = 0xbf;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        len = 2;
    else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        if (c == 0xe0)
            lo = 0xa0;          /* no overlongs */
        else if (c == 0xed)
            hi = 0x9f;          /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;          /* nothing past U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || in[1] < lo || in[1] > hi)
        return 0;
    for (size_t i = 2; i < len; i++)
        if (in[i] < 0x80 || in[i] > 0xbf)
            return 0;
    return len;
}

size_t sf_jd_utf8_repair(const uint8_t *in, size_t n, uint8_t *out, size_t cap, size_t *bad,
                         bool *cut)
{
    static const uint8_t replacement[3] = { 0xef, 0xbf, 0xbd };
    size_t i = 0, o = 0;

    *bad = 0;
    *cut = false;
    while (i < n) {
        size_t len = utf8_seq(in + i, n - i);
        const uint8_t *src = len > 0 ? in + i : replacement;
        size_t w = len > 0 ? len : sizeof(replacement);

        if (o + w > cap) {
            *cut = true;
            break;
        }
        memcpy(out + o, src, w);
        o += w;
        if (len == 0) {
            (*bad)++;
            len = 1;
        }
        i += len;
    }
    return o;
}

sf_jd_builder *sf_jd_builder_create(sf_arena *arena, size_t max_records, size_t max_message)
{
    sf_jd_builder *b = sf_calloc(1, sizeof(*b));

    if (b == NULL)
        return NULL;
    b->arena = arena;
    b->max_records = max_records;
    b->max_message = max_message;
    return b;
}

void sf_jd_builder_destroy(sf_jd_builder *b)
{
    sf_free(b);
}

void sf_jd_builder_reset(sf_jd_builder *b)
{
    sf_arena_reset(b->arena);
    b->records = NULL;
    b->n = 0;
    b->bytes = 0;
}

size_t sf_jd_builder_count(const sf_jd_builder *b)
{
    return b->n;
}

size_t sf_jd_builder_bytes(const sf_jd_builder *b)
{
    return b->bytes;
}

static any_value *string_value(sf_arena *a, const uint8_t *s, size_t n)
{
    any_value *v = sf_arena_alloc(a, sizeof(*v));
    char *copy = sf_arena_alloc(a, n + 1);

    if (v == NULL || copy == NULL)
        return NULL;
    opentelemetry__proto__common__v1__any_value__init(v);
    memcpy(copy, s, n);
    copy[n] = '\0';
    v->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    v->string_value = copy;
    return v;
}

/* The attribute key=s[0, n) into r, unless s is absent; a value that is
 * not UTF-8, holds a NUL or is longer than SF_JD_MAX_FIELD is left out and
 * counted. SF_ENOMEM. */
static sf_status add_field(sf_jd_builder *b, log_record *r, const char *key, const uint8_t *s,
                           size_t n, sf_jd_notes *notes)
{
    key_value *kv;

    if (s == NULL)
        return SF_OK;
    if (n > SF_JD_MAX_FIELD || memchr(s, '\0', n) != NULL ||
        !sf_otlp_utf8_valid(s, n)) {
        notes->dropped_fields++;
        return SF_OK;
    }
    kv = sf_arena_alloc(b->arena, sizeof(*kv));
    if (kv == NULL)
        return SF_ENOMEM;
    opentelemetry__proto__common__v1__key_value__init(kv);
    kv->key = (char *)key;
    kv->value = string_value(b->arena, s, n);
    if (kv->value == NULL)
        return SF_ENOMEM;
    r->attributes[r->n_attributes++] = kv;
    b->bytes += strlen(key) + n;
    return SF_OK;
}

sf_status sf_jd_builder_add(sf_jd_builder *b, const sf_jd_entry *e, uint64_t observed_ns,
                            sf_jd_notes *notes)
{
    log_record *r;
    const char *text;
    int number;

    if (b->n == b->max_records)
        return SF_FULL;
    if (b->records == NULL) {
        b->records = sf_arena_alloc(b->arena, b->max_records * sizeof(*b->records));
        if (b->records == NULL)
            return SF_ENOMEM;
    }
    r = sf_arena_alloc(b->arena, sizeof(*r));
    if (r == NULL)
        return SF_ENOMEM;
    opentelemetry__proto__logs__v1__log_record__init(r);
    r->time_unix_nano = e->realtime_us * 1000u;
    r->observed_time_unix_nano = observed_ns;
    if (sf_jd_severity(e->priority, e->priority_len, &number, &text)) {
        r->severity_number = (Opentelemetry__Proto__Logs__V1__SeverityNumber)number;
        r->severity_text = (char *)text;
    }
    if (e->message != NULL) {
        /* a replaced byte takes three: room for all of them, within the bound */
        size_t cap = e->message_len <= b->max_message / 3 ? e->message_len * 3 : b->max_message;
        size_t bad, len;
        bool cut;
        uint8_t *text_out;

        text_out = sf_arena_alloc(b->arena, cap + 1);
        if (text_out == NULL)
            return SF_ENOMEM;
        len = sf_jd_utf8_repair(e->message, e->message_len, text_out, cap, &bad, &cut);
        text_out[len] = '\0';
        notes->truncated += cut;
        notes->invalid_utf8 += bad > 0;
        r->body = sf_arena_alloc(b->arena, sizeof(*r->body));
        if (r->body == NULL)
            return SF_ENOMEM;
        opentelemetry__proto__common__v1__any_value__init(r->body);
        r->body->value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
        r->body->string_value = (char *)text_out;
        b->bytes += len;
    }
    r->attributes = sf_arena_alloc(b->arena, 3 * sizeof(*r->attributes));
    if (r->attributes == NULL ||
        add_field(b, r, "_SYSTEMD_UNIT", e->unit, e->unit_len, notes) != SF_OK ||
        add_field(b, r, "SYSLOG_IDENTIFIER", e->identifier, e->identifier_len, notes) != SF_OK ||
        add_field(b, r, "_PID", e->pid, e->pid_len, notes) != SF_OK)
        return SF_ENOMEM;
    b->records[b->n++] = r;
    return SF_OK;
}

sf_status sf_jd_builder_encode(sf_jd_builder *b, uint8_t **out, size_t *len)
{
    Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest req;
    Opentelemetry__Proto__Logs__V1__ResourceLogs rl, *rlp = &rl;
    Opentelemetry__Proto__Logs__V1__ScopeLogs sl, *slp = &sl;
    size_t size;

    opentelemetry__proto__collector__logs__v1__export_logs_service_request__init(&req);
    opentelemetry__proto__logs__v1__resource_logs__init(&rl);
    opentelemetry__proto__logs__v1__scope_logs__init(&sl);
    sl.n_log_records = b->n;
    sl.log_records = b->records;
    rl.n_scope_logs = 1;
    rl.scope_logs = &slp;
    req.n_resource_logs = 1;
    req.resource_logs = &rlp;
    size = opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(
        &req);
    *out = sf_malloc(size ? size : 1);
    if (*out == NULL)
        return SF_ENOMEM;
    *len = opentelemetry__proto__collector__logs__v1__export_logs_service_request__pack(&req,
                                                                                        *out);
    return SF_OK;
}
