/* tests/fuzz/fuzz_otlp_check.h: the filter property the OTLP fuzz target
 * enforces on every output: no attribute key outside the allowlist of its
 * context and no non-empty span status message, checked twice, by an
 * independent walk of the encoded bytes (every occurrence of every field,
 * so nothing protobuf merging would hide) and on the protobuf-c tree. */
#ifndef SF_FUZZ_OTLP_CHECK_H
#define SF_FUZZ_OTLP_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sf_request.h"

/* What fuzz_otlp_proto's policy keeps, per context (span: "x" is listed in
 * keep_keys but then deleted, so it is not here). */
static const char *const fuzz_allowed_resource[] = { "service.name", "r", NULL };
static const char *const fuzz_allowed_scope[] = { "scope.keep", "s", NULL };
static const char *const fuzz_allowed_span[] = { "gen_ai.request.id", "gen_ai.usage.prompt_tokens",
                                                 "tp_rank", "k", NULL };
static const char *const fuzz_allowed_event[] = { "batch_size", "e", NULL };
static const char *const fuzz_allowed_link[] = { "link.keep", "l", NULL };

static void fuzz_fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fuzz_fail(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    fputs("FUZZ CHECK FAILED: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

static int fuzz_key_allowed(const char *const *allowed, const uint8_t *key, size_t len)
{
    for (size_t i = 0; allowed[i] != NULL; i++) {
        if (strlen(allowed[i]) == len && memcmp(allowed[i], key, len) == 0)
            return 1;
    }
    return 0;
}

/* ---- the encoded bytes --------------------------------------------------- */

typedef struct fuzz_field {
    uint32_t number;
    unsigned wire_type;
    uint64_t varint;                /* wire type 0 */
    const uint8_t *data;            /* wire type 2 */
    size_t len;
} fuzz_field;

static int fuzz_varint(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

/* Next field of a message in [*p, end): 1 with *f filled, 0 at the end.
 * Malformed output fails the check: the filter must emit valid encoding. */
static int fuzz_next(const uint8_t **p, const uint8_t *end, fuzz_field *f, const char *who)
{
    uint64_t tag, v;

    if (*p >= end)
        return 0;
    if (fuzz_varint(p, end, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff)
        fuzz_fail("%s: output has a bad tag", who);
    memset(f, 0, sizeof(*f));
    f->number = (uint32_t)(tag >> 3);
    f->wire_type = tag & 7;
    switch (f->wire_type) {
    case 0:
        if (fuzz_varint(p, end, &f->varint) != 0)
            fuzz_fail("%s: output has a bad varint", who);
        break;
    case 1:
        if (end - *p < 8)
            fuzz_fail("%s: output has a short fixed64", who);
        *p += 8;
        break;
    case 5:
        if (end - *p < 4)
            fuzz_fail("%s: output has a short fixed32", who);
        *p += 4;
        break;
    case 2:
        if (fuzz_varint(p, end, &v) != 0 || v > (uint64_t)(end - *p))
            fuzz_fail("%s: output has a bad length", who);
        f->data = *p;
        f->len = (size_t)v;
        *p += v;
        break;
    default:
        fuzz_fail("%s: output has wire type %u", who, f->wire_type);
    }
    return 1;
}

/* An attributes array element (KeyValue): every key it carries must be allowed. */
static void fuzz_wire_kv(const uint8_t *p, const uint8_t *end, const char *const *allowed,
                         const char *ctx, const char *who)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, who)) {
        if (f.number == 1 && f.wire_type == 2 && !fuzz_key_allowed(allowed, f.data, f.len))
            fuzz_fail("%s: %s attribute '%.*s' survived the filter", who, ctx, (int)f.len,
                      (const char *)f.data);
    }
}

/* A message whose field `attr_field` holds its attributes. */
static void fuzz_wire_attrs(const uint8_t *p, const uint8_t *end, uint32_t attr_field,
                            const char *const *allowed, const char *ctx, const char *who)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, who)) {
        if (f.number == attr_field && f.wire_type == 2)
            fuzz_wire_kv(f.data, f.data + f.len, allowed, ctx, who);
    }
}

static void fuzz_wire_status(const uint8_t *p, const uint8_t *end, const char *who)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, who)) {
        if (f.number == 2 && f.wire_type == 2 && f.len != 0)
            fuzz_fail("%s: status message '%.*s' survived", who, (int)f.len, (const char *)f.data);
    }
}

static void fuzz_wire_span(const uint8_t *p, const uint8_t *end, const char *who)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, who)) {
        if (f.wire_type != 2)
            continue;
        if (f.number == 9)
            fuzz_wire_kv(f.data, f.data + f.len, fuzz_allowed_span, "span", who);
        else if (f.number == 11)
            fuzz_wire_attrs(f.data, f.data + f.len, 3, fuzz_allowed_event, "spanevent", who);
        else if (f.number == 13)
            fuzz_wire_attrs(f.data, f.data + f.len, 4, fuzz_allowed_link, "link", who);
        else if (f.number == 15)
            fuzz_wire_status(f.data, f.data + f.len, who);
    }
}

static void fuzz_wire_scope_spans(const uint8_t *p, const uint8_t *end, const char *who)
{
    fuzz_field f;

    while (fuzz_next(&p, end, &f, who)) {
        if (f.wire_type != 2)
            continue;
        if (f.number == 1)
            fuzz_wire_attrs(f.data, f.data + f.len, 3, fuzz_allowed_scope, "scope", who);
        else if (f.number == 2)
            fuzz_wire_span(f.data, f.data + f.len, who);
    }
}

static void fuzz_wire_request(const uint8_t *p, const uint8_t *end, const char *who)
{
    fuzz_field f, g;

    while (fuzz_next(&p, end, &f, who)) {
        const uint8_t *q, *qend;

        if (f.number != 1 || f.wire_type != 2)
            continue;
        q = f.data;
        qend = f.data + f.len;
        while (fuzz_next(&q, qend, &g, who)) {       /* ResourceSpans */
            if (g.wire_type != 2)
                continue;
            if (g.number == 1)
                fuzz_wire_attrs(g.data, g.data + g.len, 1, fuzz_allowed_resource, "resource", who);
            else if (g.number == 2)
                fuzz_wire_scope_spans(g.data, g.data + g.len, who);
        }
    }
}

/* ---- the decoded tree ----------------------------------------------------- */

static void fuzz_tree_kvs(sf_otlp_kv *const *kv, size_t n, const char *const *allowed,
                          const char *ctx, const char *who)
{
    for (size_t i = 0; i < n; i++) {
        if (!fuzz_key_allowed(allowed, (const uint8_t *)kv[i]->key, strlen(kv[i]->key)))
            fuzz_fail("%s: %s attribute '%s' survived the filter (tree)", who, ctx, kv[i]->key);
    }
}

static void fuzz_tree_request(const sf_otlp_request *req, const char *who)
{
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];

        if (rs->resource)
            fuzz_tree_kvs(rs->resource->attributes, rs->resource->n_attributes,
                          fuzz_allowed_resource, "resource", who);
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[j];

            if (ss->scope)
                fuzz_tree_kvs(ss->scope->attributes, ss->scope->n_attributes, fuzz_allowed_scope,
                              "scope", who);
            for (size_t k = 0; k < ss->n_spans; k++) {
                const sf_otlp_span *sp = ss->spans[k];

                fuzz_tree_kvs(sp->attributes, sp->n_attributes, fuzz_allowed_span, "span", who);
                if (sp->status && sp->status->message && sp->status->message[0] != '\0')
                    fuzz_fail("%s: status message '%s' survived (tree)", who, sp->status->message);
                for (size_t e = 0; e < sp->n_events; e++)
                    fuzz_tree_kvs(sp->events[e]->attributes, sp->events[e]->n_attributes,
                                  fuzz_allowed_event, "spanevent", who);
                for (size_t l = 0; l < sp->n_links; l++)
                    fuzz_tree_kvs(sp->links[l]->attributes, sp->links[l]->n_attributes,
                                  fuzz_allowed_link, "link", who);
            }
        }
    }
}

/* Abort unless the encoded request `data` is filtered (unused by targets
 * that include this header for fuzz_fail alone). */
static __attribute__((unused)) void fuzz_check_filtered(const uint8_t *data, size_t len, const char *who)
{
    sf_otlp_request *req;

    fuzz_wire_request(data, data + len, who);
    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, len,
                                                                                           data);
    if (req != NULL) {
        fuzz_tree_request(req, who);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                              NULL);
    }
}

#endif
