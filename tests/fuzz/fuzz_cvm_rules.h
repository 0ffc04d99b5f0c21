/* tests/fuzz/fuzz_cvm_rules.h: the fuzz targets' check that every string a
 * declared-mode transform exports satisfies its field's rule. The input
 * goes through configs/cvm.yaml's transform as shipped (loaded by the real
 * loader); the output is decoded with protobuf-c and judged by this file on
 * its own: each kept attribute's value against its rule as the parser read
 * it (types; hex, sets and patterns matched here with PCRE2, not the codec's
 * fast paths), one entry per key, every string within the bound, names and
 * scope names against their IsMatch (PCRE2), the other string fields empty,
 * no entity_refs; under kept_value_types: single no array at all; no span
 * with more events or links than max_events_per_span / max_links_per_span;
 * no request with more spans, resource or scope entries than its caps;
 * under pseudonymize_ids every non-zero trace, span, parent and link id that
 * leaves is the HMAC (OpenSSL's one-shot HMAC, the key set below) of one the
 * input held as protobuf-c reads it: none leaves as it came (unless it is
 * also the pseudonym of another), all-zero ids stay zero. */
#ifndef SF_FUZZ_CVM_RULES_H
#define SF_FUZZ_CVM_RULES_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pcre2.h>

#define CVM_FUZZ_KEY "the-fuzz-targets-pseudonym-key"

static struct sf_component cvm_comp;
static const sf_transform_config *cvm_cfg;

static void cvm_init_once(void)
{
    static int done;
    sf_diag *diag;
    sf_config *cfg = NULL;
    sf_config_component *cc;

    if (done)
        return;
    done = 1;
    setenv("SPANFENCE_GATEWAY_ENDPOINT", "https://gateway.example:4318", 1);
    setenv("SPANFENCE_GATEWAY_TOKEN", "fuzz", 1);
    setenv("SPANFENCE_PSEUDONYM_KEY", CVM_FUZZ_KEY, 1);
    diag = sf_diag_create(NULL);
    if (sf_config_load(SF_SOURCE_DIR "/configs/cvm.yaml", diag, &cfg) != SF_OK) {
        sf_diag_print(diag);
        abort();
    }
    sf_diag_destroy(diag);
    cc = sf_config_find(cfg, "transform/allowlist");
    if (cc == NULL)
        abort();
    cvm_cfg = cc->config;
    cvm_comp.type = cc->type;
    cvm_comp.id = cc->id;
    cvm_comp.config = cc->config;
    if (cc->type->create(&cvm_comp, cc->config) != SF_OK)
        abort();
}

/* Whether `pattern` (PCRE2, '$' at the end only, as IsMatch) finds a match in s. */
static bool cvm_matches(const char *pattern, const char *s, size_t n)
{
    int err;
    PCRE2_SIZE at;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED,
                                   PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &at, NULL);
    pcre2_match_data *md;
    int rc;

    if (re == NULL)
        fuzz_fail("pattern '%s' does not compile", pattern);
    md = pcre2_match_data_create_from_pattern(re, NULL);
    rc = pcre2_match(re, (PCRE2_SPTR)s, n, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

static bool cvm_hex(const char *s, size_t n, uint32_t lo, uint32_t hi)
{
    if (n < lo || n > hi)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

/* One scalar against the rule's alternatives. */
static bool cvm_scalar_fits(const sf_otlp_value_rule *r, const sf_otlp_any *v)
{
    unsigned type;

    switch (v->value_case) {
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE: type = SF_OTLP_VAL_STRING; break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE: type = SF_OTLP_VAL_INT; break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE: type = SF_OTLP_VAL_DOUBLE; break;
    case OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE: type = SF_OTLP_VAL_BOOL; break;
    default: return false;
    }
    if (type == SF_OTLP_VAL_STRING && strlen(v->string_value) > sf_transform_max_string(cvm_cfg))
        return false;
    if (r->n_alts == 0)
        return r->pseudonym && (type == SF_OTLP_VAL_STRING || type == SF_OTLP_VAL_INT);
    for (size_t i = 0; i < r->n_alts; i++) {
        const sf_otlp_value_alt *a = &r->alts[i];
        const char *s = v->string_value;
        bool ok;

        if (!(a->types & type))
            continue;
        if (type != SF_OTLP_VAL_STRING)
            return true;
        switch (a->shape) {
        case SF_OTLP_STR_HEX: ok = cvm_hex(s, strlen(s), a->min_len, a->max_len); break;
        case SF_OTLP_STR_SET:
            ok = false;
            for (size_t j = 0; j < a->n_set; j++)
                ok = ok || strcmp(a->set[j], s) == 0;
            break;
        case SF_OTLP_STR_REGEX: ok = cvm_matches(a->regex, s, strlen(s)); break;
        default: ok = true; break;
        }
        if (ok)
            return true;
    }
    return false;
}

/* Attributes of context c: kept keys only, once each, values fitting. */
static void cvm_check_attrs(sf_otlp_ctx c, size_t n, sf_otlp_kv *const *kv)
{
    const sf_transform_program *p = cvm_cfg->program;

    for (size_t i = 0; i < n; i++) {
        const sf_otlp_value_rule *rule = NULL;

        if (!sf_transform_keeps_key(p, c, kv[i]->key))
            fuzz_fail("%s key '%s' left", sf_otlp_ctx_name(c), kv[i]->key);
        for (size_t j = 0; j < i; j++)
            if (strcmp(kv[j]->key, kv[i]->key) == 0)
                fuzz_fail("%s key '%s' left twice", sf_otlp_ctx_name(c), kv[i]->key);
        for (size_t o = 0; o < sf_transform_op_count(p, c); o++) {
            const sf_transform_op *op = sf_transform_op_get(p, c, o);

            if (op->kind == SF_RULE_VALUE && strcmp(op->keys.keys[0], kv[i]->key) == 0)
                rule = op->rule;
        }
        if (rule == NULL || kv[i]->value == NULL)
            fuzz_fail("%s key '%s' left without a rule or a value", sf_otlp_ctx_name(c),
                      kv[i]->key);
        if (kv[i]->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE &&
            cvm_cfg->kept_value_types == SF_TRANSFORM_VALUES_SINGLE)
            fuzz_fail("%s key '%s' left holding an array", sf_otlp_ctx_name(c), kv[i]->key);
        if (kv[i]->value->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE) {
            const Opentelemetry__Proto__Common__V1__ArrayValue *a = kv[i]->value->array_value;

            for (size_t j = 0; a != NULL && j < a->n_values; j++)
                if (!cvm_scalar_fits(rule, a->values[j]))
                    fuzz_fail("%s key '%s': element %zu does not fit its rule",
                              sf_otlp_ctx_name(c), kv[i]->key, j);
        } else if (!cvm_scalar_fits(rule, kv[i]->value)) {
            fuzz_fail("%s key '%s': the value does not fit its rule", sf_otlp_ctx_name(c),
                      kv[i]->key);
        }
    }
}

/* The IsMatch pattern that keeps field f, or NULL. */
static const char *cvm_field_pattern(sf_otlp_field f)
{
    const sf_transform_program *p = cvm_cfg->program;

    for (int c = 0; c < SF_OTLP_CTX_COUNT; c++)
        for (size_t o = 0; o < sf_transform_op_count(p, (sf_otlp_ctx)c); o++) {
            const sf_transform_op *op = sf_transform_op_get(p, (sf_otlp_ctx)c, o);

            if (op->kind == SF_RULE_SET_FIELD && op->field == f)
                return op->pattern;
        }
    return NULL;
}

static void cvm_check_name(sf_otlp_field f, const char *name)
{
    const char *pattern = cvm_field_pattern(f);

    if (name == NULL || name[0] == '\0' || strcmp(name, "other") == 0)
        return;
    if (pattern == NULL || !cvm_matches(pattern, name, strlen(name)))
        fuzz_fail("%s '%s' left and does not match its rule", sf_otlp_field_name(f), name);
    if (strlen(name) > sf_transform_max_string(cvm_cfg))
        fuzz_fail("%s longer than the bound", sf_otlp_field_name(f));
}

static bool cvm_empty(const char *s)
{
    return s == NULL || s[0] == '\0';
}

/* The pseudonyms of the input's ids (trace, span, parent, link), as
 * protobuf-c reads the input, into ids[0, *n) (16 bytes each, the first len
 * used); false when there are more than max. */
typedef struct cvm_id {
    size_t len;
    uint8_t v[16];
} cvm_id;

static void cvm_pseudo(ProtobufCBinaryData id, cvm_id *out)
{
    uint8_t msg[17], mac[32];
    unsigned int mlen = 0;
    bool any = false;

    out->len = id.len;
    if (id.len != 16 && id.len != 8)
        return;
    msg[0] = id.len == 16 ? 'T' : 'S';
    memcpy(msg + 1, id.data, id.len);
    if (HMAC(EVP_sha256(), CVM_FUZZ_KEY, (int)strlen(CVM_FUZZ_KEY), msg, id.len + 1, mac,
             &mlen) == NULL)
        abort();
    for (size_t i = 0; i < id.len; i++)
        any = any || mac[i] != 0;
    if (!any)
        mac[id.len - 1] = 1;
    memcpy(out->v, mac, id.len);
}

static bool cvm_input_ids(const sf_otlp_request *req, cvm_id *ids, size_t max, size_t *n)
{
    *n = 0;
    for (size_t i = 0; req != NULL && i < req->n_resource_spans; i++)
        for (size_t j = 0; j < req->resource_spans[i]->n_scope_spans; j++)
            for (size_t k = 0; k < req->resource_spans[i]->scope_spans[j]->n_spans; k++) {
                const sf_otlp_span *sp = req->resource_spans[i]->scope_spans[j]->spans[k];
                const ProtobufCBinaryData own[3] = { sp->trace_id, sp->span_id,
                                                     sp->parent_span_id };

                if (*n + 3 + 2 * sp->n_links > max)
                    return false;
                for (size_t x = 0; x < 3; x++)
                    cvm_pseudo(own[x], &ids[(*n)++]);
                for (size_t l = 0; l < sp->n_links; l++) {
                    cvm_pseudo(sp->links[l]->trace_id, &ids[(*n)++]);
                    cvm_pseudo(sp->links[l]->span_id, &ids[(*n)++]);
                }
            }
    return true;
}

/* An exported id (under pseudonymize_ids, when the input's ids are known):
 * all zero, or the pseudonym of one of the input's. */
static void cvm_check_id(ProtobufCBinaryData id, const cvm_id *in, size_t n, bool known)
{
    bool zero = true;

    if (!cvm_cfg->pseudonymize_ids || !known || id.len == 0)
        return;
    for (size_t i = 0; i < id.len; i++)
        zero = zero && id.data[i] == 0;
    if (zero)
        return;
    for (size_t i = 0; i < n; i++)
        if (in[i].len == id.len && memcmp(in[i].v, id.data, id.len) == 0)
            return;
    fuzz_fail("an id of %zu bytes left that is no input id's pseudonym", id.len);
}

/* The input through cvm.yaml's transform; the output judged. */
static void check_cvm_rules(const uint8_t *data, size_t size)
{
    static cvm_id in_ids[4096];
    sf_otlp_request *in_req;
    size_t n_in = 0, spans = 0;
    bool known;
    sf_buf *out = NULL;
    sf_otlp_request *req;

    cvm_init_once();
    if (sf_otlp_rewrite(data, size, SF_OTLP_DEFAULT_MAX_DEPTH,
                        cvm_comp.type->edit(&cvm_comp, SF_SIGNAL_TRACES), &out, NULL) != SF_OK)
        return;         /* refused or failed closed: nothing left */
    req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, out->len, out->data);
    if (req == NULL)
        fuzz_fail("protobuf-c cannot read cvm.yaml's output");
    in_req = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, size, data);
    known = in_req != NULL && cvm_input_ids(in_req, in_ids, sizeof(in_ids) / sizeof(in_ids[0]),
                                            &n_in);
    if (cvm_cfg->max_resources_per_request > 0 &&
        req->n_resource_spans > (size_t)cvm_cfg->max_resources_per_request)
        fuzz_fail("a request left with %zu resource entries", req->n_resource_spans);
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];

        if (cvm_cfg->max_scopes_per_resource > 0 &&
            rs->n_scope_spans > (size_t)cvm_cfg->max_scopes_per_resource)
            fuzz_fail("a resource entry left with %zu scope entries", rs->n_scope_spans);

        if (!cvm_empty(rs->schema_url))
            fuzz_fail("ResourceSpans.schema_url left");
        if (rs->resource != NULL) {
            if (rs->resource->n_entity_refs > 0)
                fuzz_fail("entity_refs left");
            cvm_check_attrs(SF_OTLP_RESOURCE, rs->resource->n_attributes,
                            rs->resource->attributes);
        }
        for (size_t j = 0; j < rs->n_scope_spans; j++) {
            const sf_otlp_scope_spans *ss = rs->scope_spans[j];

            if (!cvm_empty(ss->schema_url))
                fuzz_fail("ScopeSpans.schema_url left");
            if (ss->scope != NULL) {
                if (!cvm_empty(ss->scope->version))
                    fuzz_fail("scope version left");
                if (!cvm_empty(ss->scope->name) &&
                    !cvm_matches(cvm_field_pattern(SF_OTLP_FIELD_SCOPE_NAME), ss->scope->name,
                                 strlen(ss->scope->name)))
                    fuzz_fail("scope name '%s' left", ss->scope->name);
                cvm_check_attrs(SF_OTLP_SCOPE, ss->scope->n_attributes,
                                ss->scope->attributes);
            }
            for (size_t k = 0; k < ss->n_spans; k++) {
                const sf_otlp_span *sp = ss->spans[k];

                if (cvm_cfg->max_spans_per_request > 0 &&
                    ++spans > (size_t)cvm_cfg->max_spans_per_request)
                    fuzz_fail("a request left with more than %lld spans",
                              (long long)cvm_cfg->max_spans_per_request);
                cvm_check_id(sp->trace_id, in_ids, n_in, known);
                cvm_check_id(sp->span_id, in_ids, n_in, known);
                cvm_check_id(sp->parent_span_id, in_ids, n_in, known);
                cvm_check_name(SF_OTLP_FIELD_SPAN_NAME, sp->name);
                if (!cvm_empty(sp->trace_state) ||
                    (sp->status != NULL && !cvm_empty(sp->status->message)))
                    fuzz_fail("span trace_state or status message left");
                cvm_check_attrs(SF_OTLP_SPAN, sp->n_attributes, sp->attributes);
                if ((cvm_cfg->max_events_per_span > 0 &&
                     sp->n_events > (size_t)cvm_cfg->max_events_per_span) ||
                    (cvm_cfg->max_links_per_span > 0 &&
                     sp->n_links > (size_t)cvm_cfg->max_links_per_span))
                    fuzz_fail("a span left with %zu events and %zu links", sp->n_events,
                              sp->n_links);
                for (size_t e = 0; e < sp->n_events; e++) {
                    cvm_check_name(SF_OTLP_FIELD_EVENT_NAME, sp->events[e]->name);
                    cvm_check_attrs(SF_OTLP_SPANEVENT, sp->events[e]->n_attributes,
                                    sp->events[e]->attributes);
                }
                for (size_t l = 0; l < sp->n_links; l++) {
                    if (!cvm_empty(sp->links[l]->trace_state))
                        fuzz_fail("link trace_state left");
                    cvm_check_id(sp->links[l]->trace_id, in_ids, n_in, known);
                    cvm_check_id(sp->links[l]->span_id, in_ids, n_in, known);
                    cvm_check_attrs(SF_OTLP_LINK, sp->links[l]->n_attributes,
                                    sp->links[l]->attributes);
                }
            }
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                          NULL);
    if (in_req != NULL)
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            in_req, NULL);
    sf_buf_unref(out);
}

#endif
