/* bench/sample_allowlist.h: the sample batch's allowlist (the one
 * bench/configs/pipeline.yaml uses) as the transform processor builds it,
 * shared by the benchmarks (bench_codec, bench_floor). */
#ifndef SF_BENCH_SAMPLE_ALLOWLIST_H
#define SF_BENCH_SAMPLE_ALLOWLIST_H

#include <stdio.h>
#include <string.h>

#include "sample_batch.h"
#include "internal/sf_core.h"
#include "../processors/transform/transform.h"

/* A transform program: the processor instance for the tree path and its
 * compiled form for the wire path. */
static sf_transform_config allow_cfg;
static struct sf_component allow_comp;
static const sf_otlp_edit *allow_edit;

static void *program_alloc(void *ctx, size_t size)
{
    return sf_arena_alloc(ctx, size);
}

static void program_error(void *ctx, const sf_node *at, const char *subpath, const char *msg)
{
    (void)ctx;
    (void)at;
    fprintf(stderr, "allowlist: %s: %s\n", subpath ? subpath : "-", msg);
}

static int allowlist_create(sf_arena *mem)
{
    static const char *const span_keys[] = { SF_SAMPLE_SPAN_KEYS };
    static char keep_span[512], keep_event[128];
    static char *stmts[] = { keep_span, "set(span.status.message, \"\")", keep_event };
    sf_node items[3], seq = { .kind = SF_NODE_SEQ, .n = 3 };
    sf_node *item_ptrs[3];
    sf_transform_sink sink = { .ctx = mem, .alloc = program_alloc, .error = program_error };
    size_t off = (size_t)snprintf(keep_span, sizeof(keep_span), "keep_keys(span.attributes, [");

    for (size_t i = 0; i < sizeof(span_keys) / sizeof(span_keys[0]); i++)
        off += (size_t)snprintf(keep_span + off, sizeof(keep_span) - off, "%s\"%s\"",
                                i ? ", " : "", span_keys[i]);
    snprintf(keep_span + off, sizeof(keep_span) - off, "])");
    snprintf(keep_event, sizeof(keep_event), "keep_keys(spanevent.attributes, [\"%s\"])",
             SF_SAMPLE_EVENT_KEYS);
    for (int i = 0; i < 3; i++) {
        items[i] = (sf_node){ .kind = SF_NODE_SCALAR, .line = i + 1, .col = 1,
                              .text = stmts[i], .len = strlen(stmts[i]) };
        item_ptrs[i] = &items[i];
    }
    seq.items = item_ptrs;
    if (sf_transform_program_build(&seq, &sink, &allow_cfg.program) != SF_OK)
        return -1;
    allow_cfg.error_mode = SF_ERROR_MODE_PROPAGATE;
    allow_comp.type = &sf_transform_processor_type;
    allow_comp.id = "transform/allowlist";
    allow_comp.config = &allow_cfg;
    if (sf_transform_processor_type.create(&allow_comp, &allow_cfg) != SF_OK)
        return -1;
    allow_edit = sf_transform_processor_type.edit(&allow_comp, SF_SIGNAL_TRACES);
    return 0;
}

static void allowlist_destroy(void)
{
    sf_transform_processor_type.destroy(&allow_comp);
}

#endif
