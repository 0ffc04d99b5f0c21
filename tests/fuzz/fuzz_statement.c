/* tests/fuzz/fuzz_statement.c: libFuzzer target for the transform statement
 * parser: bytes as one statement, parsed in every context group (and flat).
 * A parsed statement must satisfy the program's invariants (a known kind,
 * a real context the kind exists in, keys sorted and unique, a pattern and
 * a replacement exactly for replace_pattern); an error must be a complete
 * message that fits the caller's buffer, however small. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "processors/transform/transform.h"

static void *sink_alloc(void *ctx, size_t size)
{
    return sf_arena_alloc(ctx, size);
}

static void sink_error(void *ctx, const sf_node *at, const char *subpath, const char *msg)
{
    (void)ctx, (void)at, (void)subpath, (void)msg;
}

static void fail(const char *text, size_t len, int group, const char *why)
{
    fprintf(stderr, "statement '%.*s' in group %d: %s\n", (int)len, text, group, why);
    abort();
}

static void check_op(const char *text, size_t len, int group, const sf_transform_op *op)
{
    switch (op->kind) {
    case SF_RULE_KEEP_KEYS:
    case SF_RULE_DELETE_KEY:
    case SF_RULE_CLEAR_STATUS_MESSAGE:
    case SF_RULE_CLEAR_TRACE_STATE:
    case SF_RULE_REPLACE_PATTERN:
    case SF_RULE_VALUE:
    case SF_RULE_PSEUDONYMIZE:
    case SF_RULE_SET_FIELD:
    case SF_RULE_KEEP_EXEMPLARS:
        break;
    default:
        fail(text, len, group, "unknown kind");
    }
    if (op->ctx < SF_OTLP_RESOURCE || op->ctx >= SF_OTLP_CTX_COUNT)
        fail(text, len, group, "no context");
    if ((sf_otlp_ctx)group != SF_TRANSFORM_CTX_NONE && op->ctx != (sf_otlp_ctx)group)
        fail(text, len, group, "context differs from its group");
    if (op->kind == SF_RULE_CLEAR_STATUS_MESSAGE && op->ctx != SF_OTLP_SPAN)
        fail(text, len, group, "status message outside span");
    if (op->kind == SF_RULE_CLEAR_TRACE_STATE && op->ctx != SF_OTLP_SPAN &&
        op->ctx != SF_OTLP_LINK)
        fail(text, len, group, "trace_state outside span and link");
    if (op->kind == SF_RULE_KEEP_EXEMPLARS && op->ctx != SF_OTLP_DATAPOINT)
        fail(text, len, group, "keep_exemplars outside datapoint");
    if (op->kind == SF_RULE_REPLACE_PATTERN) {
        if (op->ctx != SF_OTLP_SPAN && op->ctx != SF_OTLP_SPANEVENT)
            fail(text, len, group, "replace_pattern outside span and spanevent");
        if (op->pattern == NULL || op->replacement == NULL)
            fail(text, len, group, "replace_pattern without its pattern or replacement");
    } else if (op->kind == SF_RULE_SET_FIELD) {
        /* set(<field>, "v") [where not IsMatch(<field>, "re")]: a field,
         * its value; the body's condition is a rule, not a pattern */
        if (op->field == SF_OTLP_FIELD_NONE)
            fail(text, len, group, "set without its field");
        if (op->replacement == NULL)
            fail(text, len, group, "set without its value");
        if (op->field == SF_OTLP_FIELD_LOG_BODY && op->pattern != NULL)
            fail(text, len, group, "a pattern on the body");
    } else if (op->pattern != NULL || op->replacement != NULL) {
        fail(text, len, group, "a pattern on another kind");
    }
    if (op->kind != SF_RULE_SET_FIELD && op->field != SF_OTLP_FIELD_NONE)
        fail(text, len, group, "a field on another kind");
    if (op->kind == SF_RULE_VALUE && op->rule == NULL)
        fail(text, len, group, "a value rule without its condition");
    if (op->rule != NULL && op->kind != SF_RULE_VALUE &&
        !(op->kind == SF_RULE_SET_FIELD && op->field == SF_OTLP_FIELD_LOG_BODY))
        fail(text, len, group, "a condition on another kind");
    if ((op->kind == SF_RULE_DELETE_KEY || op->kind == SF_RULE_VALUE ||
         op->kind == SF_RULE_PSEUDONYMIZE) && op->keys.n != 1)
        fail(text, len, group, "a one-key statement without exactly one key");
    if ((op->kind != SF_RULE_KEEP_KEYS && op->kind != SF_RULE_DELETE_KEY &&
         op->kind != SF_RULE_VALUE && op->kind != SF_RULE_PSEUDONYMIZE) && op->keys.n != 0)
        fail(text, len, group, "keys on a statement of no attributes");
    if (op->keys.n > 0 && op->keys.keys == NULL)
        fail(text, len, group, "keys missing");
    for (size_t i = 0; i < op->keys.n; i++) {
        if (op->keys.keys[i] == NULL)
            fail(text, len, group, "NULL key");
        if (i > 0 && strcmp(op->keys.keys[i - 1], op->keys.keys[i]) >= 0)
            fail(text, len, group, "keys not sorted and unique");
        if (!sf_transform_keyset_has(&op->keys, op->keys.keys[i]))
            fail(text, len, group, "keyset does not find its own key");
    }
}

static void check_err(const char *text, size_t len, int group, const char *err, size_t errlen)
{
    if (errlen > 0 && memchr(err, '\0', errlen) == NULL)
        fail(text, len, group, "error message not terminated");
    if (errlen > 1 && err[0] == '\0')
        fail(text, len, group, "empty error message");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* Exact-size copies: ASan sees reads past the statement or writes past
     * the error buffer. */
    char *text = malloc(size ? size : 1);
    sf_arena *arena = sf_arena_create(4096, 1u << 20);
    const sf_transform_sink sink = { .ctx = arena, .alloc = sink_alloc, .error = sink_error };
    static const size_t errlens[] = { 1, 16, 256 };

    if (text == NULL || arena == NULL)
        abort();
    memcpy(text, data, size);
    for (int group = SF_TRANSFORM_CTX_NONE; group < SF_OTLP_CTX_COUNT; group++) {
        for (size_t e = 0; e < sizeof(errlens) / sizeof(errlens[0]); e++) {
            char *err = malloc(errlens[e]);
            sf_transform_op op;
            sf_status st;

            memset(err, 'X', errlens[e]);
            memset(&op, 0, sizeof(op));
            st = sf_transform_parse_statement(text, size, (sf_otlp_ctx)group, &sink, &op,
                                              err, errlens[e]);
            if (st == SF_OK)
                check_op(text, size, group, &op);
            else if (st == SF_CONFIG)
                check_err(text, size, group, err, errlens[e]);
            else if (st != SF_ENOMEM)
                fail(text, size, group, "unexpected status");
            free(err);
            sf_arena_reset(arena);
        }
    }
    sf_arena_destroy(arena);
    free(text);
    return 0;
}
