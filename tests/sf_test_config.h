/* tests/sf_test_config.h: the fixture of the tests that read config text
 * below the loader (the YAML reader, the config map decoder, the rows of a
 * module): an arena, the diagnostics of "t.yaml", a decode context over
 * both, and the last tree read. Header-only; include it after <cmocka.h>. */
#ifndef SF_TEST_CONFIG_H
#define SF_TEST_CONFIG_H

#include <string.h>

#include "internal/sf_config_int.h"
#include "sf_alloc.h"

typedef struct sf_test_cfg {
    sf_arena *arena;
    sf_diag *diag;
    sf_cfg_ctx ctx;
    sf_node *root;              /* of the last sf_test_cfg_decode */
} sf_test_cfg;

static inline void sf_test_cfg_init(sf_test_cfg *t)
{
    t->arena = sf_arena_create(4096, 0);
    assert_non_null(t->arena);
    t->diag = sf_diag_create("t.yaml");
    assert_non_null(t->diag);
    sf_cfg_ctx_init(&t->ctx, t->diag, t->arena);
    t->root = NULL;
}

/* Free the fixture; every counted byte must be back. */
static inline void sf_test_cfg_release(sf_test_cfg *t)
{
    sf_diag_destroy(t->diag);
    sf_arena_destroy(t->arena);
    assert_int_equal(sf_alloc_in_use(), 0);
}

/* Start the diagnostics afresh (several decodes in one test). */
static inline void sf_test_cfg_reset_diag(sf_test_cfg *t)
{
    sf_diag_destroy(t->diag);
    t->diag = sf_diag_create("t.yaml");
    assert_non_null(t->diag);
    sf_cfg_ctx_init(&t->ctx, t->diag, t->arena);
}

/* Decode the mapping under `x:` in `yaml` (which must read) with `rows`
 * into `out` (`size` bytes, zeroed first), with path "x". */
static inline sf_status sf_test_cfg_decode(sf_test_cfg *t, const sf_config_row *rows,
                                           const char *yaml, void *out, size_t size)
{
    assert_int_equal(sf_yaml_load(yaml, strlen(yaml), t->arena, t->diag, &t->root), SF_OK);
    memset(out, 0, size);
    t->ctx.path = "x";
    t->ctx.node = t->root->keys[0];
    return sf_cfg_decode(&t->ctx, rows, sf_node_get(t->root, "x"), out);
}

#endif
