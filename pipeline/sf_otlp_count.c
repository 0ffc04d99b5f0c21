/* sf_otlp_count.c: the streaming item counters (sf_otlp_count.h), and the
 * count of a decoded trace tree. The counter is a byte-wise state machine
 * over the framing levels that lead to the signal's items (three for spans
 * and log records, five for metric data points); field values off that
 * path (and every item's own bytes) are skipped in bulk. */
#include "sf_otlp_count.h"
#include "sf_otlp_schema.h"

#include <string.h>

enum { ST_TAG, ST_LEN, ST_VARINT, ST_SKIP };

void sf_span_counter_init(sf_span_counter *c)
{
    sf_span_counter_init_signal(c, SF_SIGNAL_TRACES);
}

void sf_span_counter_init_signal(sf_span_counter *c, sf_signal s)
{
    memset(c, 0, sizeof(*c));
    c->signal = s;
    c->state = ST_TAG;
    c->bad = (unsigned)s >= SF_SIGNAL_COUNT;
}

/* Leave every level that ends here; false when one was overrun. */
static bool pop_levels(sf_span_counter *c)
{
    while (c->level > 0 && c->pos >= c->end[c->level]) {
        if (c->pos > c->end[c->level])
            return false;
        c->level--;
    }
    return true;
}

/* Whether field `f` at the current level leads down toward the items:
 * resource_*, scope_*, and for metrics the metric and its typed data. */
static bool descends(const sf_span_counter *c, uint32_t f)
{
    const bool metrics = c->signal == SF_SIGNAL_METRICS;

    switch (c->level) {
    case 0:
        return f == (metrics ? SF_OTLP_NUM_METRICS_REQUEST_RESOURCE_METRICS
                     : c->signal == SF_SIGNAL_LOGS ? SF_OTLP_NUM_LOGS_REQUEST_RESOURCE_LOGS
                     : SF_OTLP_NUM_REQUEST_RESOURCE_SPANS);
    case 1:
        return f == (metrics ? SF_OTLP_NUM_RESOURCE_METRICS_SCOPE_METRICS
                     : c->signal == SF_SIGNAL_LOGS ? SF_OTLP_NUM_RESOURCE_LOGS_SCOPE_LOGS
                     : SF_OTLP_NUM_RESOURCE_SPANS_SCOPE_SPANS);
    case 2:
        return metrics && f == SF_OTLP_NUM_SCOPE_METRICS_METRICS;
    case 3:
        return metrics && (f == SF_OTLP_NUM_METRIC_GAUGE || f == SF_OTLP_NUM_METRIC_SUM ||
                           f == SF_OTLP_NUM_METRIC_HISTOGRAM ||
                           f == SF_OTLP_NUM_METRIC_EXPONENTIAL_HISTOGRAM ||
                           f == SF_OTLP_NUM_METRIC_SUMMARY);
    default:
        return false;
    }
}

/* Whether field `f` at the current level is one item. Every metric type
 * holds its points in field 1. */
static bool is_item(const sf_span_counter *c, uint32_t f)
{
    _Static_assert(SF_OTLP_NUM_GAUGE_DATA_POINTS == 1 && SF_OTLP_NUM_SUM_DATA_POINTS == 1 &&
                   SF_OTLP_NUM_HISTOGRAM_DATA_POINTS == 1 &&
                   SF_OTLP_NUM_EXP_HISTOGRAM_DATA_POINTS == 1 &&
                   SF_OTLP_NUM_SUMMARY_DATA_POINTS == 1, "data points in field 1");
    if (c->signal == SF_SIGNAL_METRICS)
        return c->level == 4 && f == SF_OTLP_NUM_GAUGE_DATA_POINTS;
    return c->level == 2 && f == (c->signal == SF_SIGNAL_LOGS ? SF_OTLP_NUM_SCOPE_LOGS_LOG_RECORDS
                                  : SF_OTLP_NUM_SCOPE_SPANS_SPANS);
}

/* A length-delimited field's length is known. */
static bool on_len(sf_span_counter *c, uint64_t len)
{
    uint32_t field = (uint32_t)(c->tag >> 3);
    uint64_t limit = c->level > 0 ? c->end[c->level] : UINT64_MAX;

    if (len > limit - c->pos)
        return false;
    if (c->groups == 0 && descends(c, field)) {
        c->level++;                                 /* into ResourceSpans, ScopeSpans, ... */
        c->end[c->level] = c->pos + len;
        c->state = ST_TAG;
        return pop_levels(c);                       /* an empty one ends at once */
    }
    if (c->groups == 0 && is_item(c, field))
        c->spans++;
    c->skip = len;
    c->state = ST_SKIP;
    if (len == 0) {
        c->state = ST_TAG;
        return pop_levels(c);
    }
    return true;
}

void sf_span_counter_feed(sf_span_counter *c, const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;

    while (p < end && !c->bad) {
        if (c->state == ST_SKIP) {
            size_t k = (uint64_t)(end - p) < c->skip ? (size_t)(end - p) : (size_t)c->skip;

            p += k;
            c->pos += k;
            c->skip -= k;
            if (c->skip == 0) {
                c->state = ST_TAG;
                c->bad = !pop_levels(c);
            }
            continue;
        }
        /* A varint byte: a tag, a length or a skipped scalar. */
        uint8_t b = *p++;

        c->pos++;
        if (c->shift >= 64) {
            c->bad = true;
            break;
        }
        c->acc |= (uint64_t)(b & 0x7f) << c->shift;
        c->shift += 7;
        if (b & 0x80)
            continue;
        uint64_t v = c->acc;

        c->acc = 0;
        c->shift = 0;
        switch (c->state) {
        case ST_TAG:
            c->tag = v;
            if ((v >> 3) == 0) {
                c->bad = true;
                break;
            }
            switch (v & 7) {
            case 0: c->state = ST_VARINT; break;
            case 1: c->skip = 8; c->state = ST_SKIP; break;
            case 5: c->skip = 4; c->state = ST_SKIP; break;
            case 2: c->state = ST_LEN; break;
            case 3:             /* an unknown group, skipped as the codec skips it */
                if (c->groups == sizeof(c->group) / sizeof(c->group[0]))
                    c->bad = true;
                else
                    c->group[c->groups++] = (uint32_t)(v >> 3);
                c->bad = c->bad || !pop_levels(c);
                break;
            case 4:
                if (c->groups == 0 || c->group[c->groups - 1] != (uint32_t)(v >> 3))
                    c->bad = true;
                else
                    c->groups--;
                c->bad = c->bad || !pop_levels(c);    /* a level may end here */
                break;
            default: c->bad = true; break;
            }
            if (c->state == ST_SKIP && c->level > 0 && c->skip > c->end[c->level] - c->pos)
                c->bad = true;
            break;
        case ST_LEN:
            c->bad = !on_len(c, v);
            break;
        case ST_VARINT:
            c->state = ST_TAG;
            c->bad = !pop_levels(c);
            break;
        }
    }
}

/* ---- OTLP/JSON ----------------------------------------------------------- */

/* The roles of the containers on the path to the items: resource_*[],
 * one of them, scope_*[], one of them, then spans[] / logRecords[], or for
 * metrics metrics[], a metric, its typed data ({gauge: ...}), dataPoints[].
 * The arrays' roles are odd. */
enum {
    R_OTHER = 0, R_TOP = 2, R_RS_ARRAY = 3, R_RS = 4, R_SS_ARRAY = 5, R_SS = 6,
    R_ITEM_ARRAY = 7, R_ITEM = 8, R_METRIC_ARRAY = 9, R_METRIC = 10, R_DATA = 12,
    R_OTHER_ARRAY = 1,          /* an array off the path: objects in it are not items */
};

static bool role_is_array(unsigned role)
{
    return role & 1;
}

void sf_json_span_counter_init(sf_json_span_counter *c)
{
    sf_json_span_counter_init_signal(c, SF_SIGNAL_TRACES);
}

void sf_json_span_counter_init_signal(sf_json_span_counter *c, sf_signal s)
{
    memset(c, 0, sizeof(*c));
    c->signal = s;
    c->bad = (unsigned)s >= SF_SIGNAL_COUNT;
}

static bool key_is(const sf_json_span_counter *c, const char *a, const char *b)
{
    size_t n = c->key_len;

    if (n > sizeof(c->key))
        return false;
    return (strlen(a) == n && memcmp(c->key, a, n) == 0) ||
           (b != NULL && strlen(b) == n && memcmp(c->key, b, n) == 0);
}

static unsigned parent_role(const sf_json_span_counter *c)
{
    if (c->depth == 0)
        return R_OTHER;
    return c->depth <= SF_JSON_COUNT_DEPTH ? c->role[c->depth - 1] : R_OTHER;
}

/* The member names on the path, per signal: both spellings protobuf's
 * JSON mapping reads. */
typedef struct json_path {
    const char *rs[2], *ss[2], *items[2];
} json_path;

static const json_path json_paths[SF_SIGNAL_COUNT] = {
    [SF_SIGNAL_TRACES] = {
        { SF_OTLP_JSON_REQUEST_RESOURCE_SPANS, SF_OTLP_NAME_REQUEST_RESOURCE_SPANS },
        { SF_OTLP_JSON_RESOURCE_SPANS_SCOPE_SPANS, SF_OTLP_NAME_RESOURCE_SPANS_SCOPE_SPANS },
        { SF_OTLP_JSON_SCOPE_SPANS_SPANS, NULL } },
    [SF_SIGNAL_LOGS] = {
        { SF_OTLP_JSON_LOGS_REQUEST_RESOURCE_LOGS, SF_OTLP_NAME_LOGS_REQUEST_RESOURCE_LOGS },
        { SF_OTLP_JSON_RESOURCE_LOGS_SCOPE_LOGS, SF_OTLP_NAME_RESOURCE_LOGS_SCOPE_LOGS },
        { SF_OTLP_JSON_SCOPE_LOGS_LOG_RECORDS, SF_OTLP_NAME_SCOPE_LOGS_LOG_RECORDS } },
    [SF_SIGNAL_METRICS] = {
        { SF_OTLP_JSON_METRICS_REQUEST_RESOURCE_METRICS,
          SF_OTLP_NAME_METRICS_REQUEST_RESOURCE_METRICS },
        { SF_OTLP_JSON_RESOURCE_METRICS_SCOPE_METRICS, SF_OTLP_NAME_RESOURCE_METRICS_SCOPE_METRICS },
        { SF_OTLP_JSON_SCOPE_METRICS_METRICS, NULL } },
};

/* Whether the current key names a metric's typed data. */
static bool key_is_data(const sf_json_span_counter *c)
{
    return key_is(c, SF_OTLP_JSON_METRIC_GAUGE, NULL) || key_is(c, SF_OTLP_JSON_METRIC_SUM, NULL) ||
           key_is(c, SF_OTLP_JSON_METRIC_HISTOGRAM, NULL) ||
           key_is(c, SF_OTLP_JSON_METRIC_EXPONENTIAL_HISTOGRAM,
                  SF_OTLP_NAME_METRIC_EXPONENTIAL_HISTOGRAM) ||
           key_is(c, SF_OTLP_JSON_METRIC_SUMMARY, NULL);
}

/* A container opens: `array` or object. Its role follows from its parent's
 * and, in an object, from the key it is the value of. */
static void json_open(sf_json_span_counter *c, bool array)
{
    const json_path *jp = &json_paths[c->signal];
    unsigned parent = parent_role(c), role = array ? R_OTHER_ARRAY : R_OTHER;

    if (c->depth == 0 && !array)
        role = R_TOP;
    else if (parent == R_TOP && array && key_is(c, jp->rs[0], jp->rs[1]))
        role = R_RS_ARRAY;
    else if (parent == R_RS_ARRAY && !array)
        role = R_RS;
    else if (parent == R_RS && array && key_is(c, jp->ss[0], jp->ss[1]))
        role = R_SS_ARRAY;
    else if (parent == R_SS_ARRAY && !array)
        role = R_SS;
    else if (parent == R_SS && array && key_is(c, jp->items[0], jp->items[1]))
        role = c->signal == SF_SIGNAL_METRICS ? R_METRIC_ARRAY : R_ITEM_ARRAY;
    else if (parent == R_METRIC_ARRAY && !array)
        role = R_METRIC;
    else if (parent == R_METRIC && !array && key_is_data(c))
        role = R_DATA;
    else if (parent == R_DATA && array && key_is(c, SF_OTLP_JSON_GAUGE_DATA_POINTS,
                                                  SF_OTLP_NAME_GAUGE_DATA_POINTS))
        role = R_ITEM_ARRAY;
    else if (parent == R_ITEM_ARRAY && !array) {
        role = R_ITEM;
        c->spans++;
    }
    if (c->depth < SF_JSON_COUNT_DEPTH)
        c->role[c->depth] = (uint8_t)role;
    c->depth++;
    c->expect_key = !array;
}

static void json_close(sf_json_span_counter *c)
{
    if (c->depth == 0) {
        c->bad = true;
        return;
    }
    c->depth--;
    c->expect_key = false;
}

void sf_json_span_counter_feed(sf_json_span_counter *c, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && !c->bad; i++) {
        uint8_t b = p[i];

        if (c->in_string) {
            if (c->escape) {
                c->escape = false;
                c->key_len = sizeof(c->key) + 1;    /* escaped: not a key we match */
            } else if (b == '\\') {
                c->escape = true;
            } else if (b == '"') {
                c->in_string = false;
            } else if (c->string_is_key) {
                if (c->key_len < sizeof(c->key))
                    c->key[c->key_len] = (char)b;
                if (c->key_len <= sizeof(c->key))
                    c->key_len++;
            }
            continue;
        }
        switch (b) {
        case '"':
            c->in_string = true;
            c->string_is_key = c->expect_key;
            if (c->expect_key)
                c->key_len = 0;
            c->expect_key = false;
            break;
        case '{':
            json_open(c, false);
            break;
        case '[':
            json_open(c, true);
            break;
        case '}':
        case ']':
            json_close(c);
            break;
        case ',':
            /* In an object the next string is a key. */
            c->expect_key = !role_is_array(parent_role(c)) && c->depth > 0 && !c->in_string;
            break;
        default:
            break;
        }
    }
}

size_t sf_otlp_count_spans(
    const Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *req)
{
    size_t n = 0;

    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = req->resource_spans[i];

        for (size_t j = 0; j < rs->n_scope_spans; j++)
            n += rs->scope_spans[j]->n_spans;
    }
    return n;
}
