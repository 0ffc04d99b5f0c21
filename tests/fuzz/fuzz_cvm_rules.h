/* tests/fuzz/fuzz_cvm_rules.h: the fuzz targets' check that every string a
 * declared-mode transform exports satisfies its field's rule. The input
 * goes through configs/cvm.yaml's transform as shipped (loaded by the real
 * loader); the output is decoded with protobuf-c and judged by this file on
 * its own: each kept attribute's value against its rule as the parser read
 * it (types; hex, sets and patterns matched here with PCRE2, not the codec's
 * fast paths), one entry per key, every string within the bound, names and
 * scope names against their IsMatch (PCRE2), the other string fields empty,
 * no entity_refs; under kept_value_types: single no array at all; no span
 * with more events or links than max_events_per_span / max_links_per_span. */
#ifndef SF_FUZZ_CVM_RULES_H
#define SF_FUZZ_CVM_RULES_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

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
    setenv("SPANFENCE_PSEUDONYM_KEY", "the-fuzz-targets-pseudonym-key", 1);
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

/* The input through cvm.yaml's transform; the output judged. */
static void check_cvm_rules(const uint8_t *data, size_t size)
{
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
    for (size_t i = 0; i < req->n_resource_spans; i++) {
        const sf_otlp_resource_spans *rs = req->resource_spans[i];

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
                    cvm_check_attrs(SF_OTLP_LINK, sp->links[l]->n_attributes,
                                    sp->links[l]->attributes);
                }
            }
        }
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(req,
                                                                                          NULL);
    sf_buf_unref(out);
}

#endif
