/* tests/pipeline/test_yaml.c: YAML text -> sf_node trees: positions,
 * anchors/aliases, merge keys, duplicate keys, syntax errors and ${env}
 * expansion (sf_yaml_load, sf_env_expand). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/sf_torture.h"

#include "tests/sf_test_config.h"

typedef sf_test_cfg fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    sf_test_cfg_init(f);
    *state = f;
    setenv("SF_T_SET", "value", 1);
    setenv("SF_T_EMPTY", "", 1);
    unsetenv("SF_T_UNSET");
    return 0;
}

static int teardown(void **state)
{
    sf_test_cfg_release(*state);
    free(*state);
    return 0;
}

static sf_status load(fx *f, const char *text)
{
    return sf_yaml_load(text, strlen(text), f->arena, f->diag, &f->root);
}

static const char *text_at(const sf_node *map, const char *key)
{
    const sf_node *n = sf_node_get(map, key);

    assert_non_null(n);
    assert_int_equal(n->kind, SF_NODE_SCALAR);
    return n->text;
}

static void test_positions_and_kinds(void **state)
{
    fx *f = *state;
    const sf_node *a, *s;

    assert_int_equal(load(f, "a:\n  b: 1\n  c: 'q'\ns: [x, ~, \"\"]\nn:\n"), SF_OK);
    assert_int_equal(f->root->kind, SF_NODE_MAP);
    assert_int_equal(f->root->n, 3);
    a = sf_node_get(f->root, "a");
    assert_int_equal(a->kind, SF_NODE_MAP);
    assert_int_equal(f->root->keys[0]->line, 1);
    assert_int_equal(f->root->keys[0]->col, 1);
    assert_int_equal(sf_node_get(a, "b")->line, 2);
    assert_int_equal(sf_node_get(a, "b")->col, 6);
    assert_true(sf_node_get(a, "b")->plain);
    assert_false(sf_node_get(a, "c")->plain);
    assert_string_equal(text_at(a, "c"), "q");
    /* the key node, for errors about the key: where the key is written */
    assert_int_equal(sf_node_key(a, "c")->line, 3);
    assert_int_equal(sf_node_key(a, "c")->col, 3);
    assert_string_equal(sf_node_key(a, "c")->text, "c");
    assert_null(sf_node_key(a, "nope"));
    assert_null(sf_node_key(sf_node_get(a, "b"), "b"));     /* not a mapping */
    s = sf_node_get(f->root, "s");
    assert_int_equal(s->kind, SF_NODE_SEQ);
    assert_int_equal(s->n, 3);
    assert_false(s->items[0]->is_null);
    assert_true(s->items[1]->is_null);
    assert_string_equal(s->items[1]->text, "");
    assert_false(s->items[2]->is_null);       /* quoted empty string is not null */
    assert_true(sf_node_get(f->root, "n")->is_null);
    assert_int_equal(sf_diag_count(f->diag), 0);
}

static void test_alias_yields_anchored_node(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "a: &x {k: v}\nb: *x\nc: &s str\nd: *s\n"), SF_OK);
    assert_ptr_equal(sf_node_get(f->root, "a"), sf_node_get(f->root, "b"));
    assert_string_equal(text_at(f->root, "d"), "str");
}

static void test_merge_keys(void **state)
{
    fx *f = *state;
    const sf_node *m;

    assert_int_equal(load(f,
        "base: &b {x: 1, y: 1}\n"
        "other: &o {y: 2, z: 2}\n"
        "one:\n  <<: *b\n  x: 9\n"
        "two:\n  z: 8\n  <<: [*b, *o]\n"), SF_OK);
    m = sf_node_get(f->root, "one");
    assert_int_equal(m->n, 2);
    assert_string_equal(text_at(m, "x"), "9");     /* explicit wins, whatever the order */
    assert_string_equal(text_at(m, "y"), "1");
    m = sf_node_get(f->root, "two");
    assert_int_equal(m->n, 3);
    assert_string_equal(text_at(m, "z"), "8");
    assert_string_equal(text_at(m, "x"), "1");
    assert_string_equal(text_at(m, "y"), "1");     /* earlier mapping in the list wins */
    assert_null(sf_node_get(m, "<<"));
}

static void test_merge_not_a_mapping(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "a:\n  <<: [x]\n"), SF_CONFIG);
    assert_int_equal(sf_diag_count(f->diag), 1);
    assert_string_equal(sf_diag_message(f->diag, 0),
                        "t.yaml:2:8: a: a merge key ('<<') takes a mapping or a list of mappings");
}

static void test_duplicate_keys(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "a:\n  k: 1\n  j: 2\n  k: 3\nb: 1\nb: 2\n"), SF_CONFIG);
    assert_non_null(f->root);                      /* the rest is still checked */
    assert_int_equal(sf_diag_errors(f->diag), 2);
    assert_string_equal(sf_diag_message(f->diag, 0), "t.yaml:4:3: a.k: duplicate key 'k'");
    assert_string_equal(sf_diag_message(f->diag, 1), "t.yaml:6:1: b: duplicate key 'b'");
    assert_string_equal(text_at(sf_node_get(f->root, "a"), "k"), "1");
}

static void test_syntax_error(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "a: [1, 2\nb: 3\n"), SF_CONFIG);
    assert_null(f->root);
    assert_int_equal(sf_diag_count(f->diag), 1);
    assert_string_equal(sf_diag_message(f->diag, 0),
                        "t.yaml:2:2: invalid yaml: did not find expected ',' or ']' (while parsing a flow sequence)");
}

static void test_empty_and_not_mapping(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "# nothing\n"), SF_CONFIG);
    assert_int_equal(load(f, "~\n"), SF_CONFIG);
    assert_int_equal(load(f, "\n\n  - a\n"), SF_CONFIG);
    assert_int_equal(load(f, "a: 1\n---\nb: 2\n"), SF_CONFIG);
    assert_int_equal(sf_diag_count(f->diag), 3);   /* the first two are the same message */
    assert_string_equal(sf_diag_message(f->diag, 0), "t.yaml:1:1: the file is empty");
    assert_string_equal(sf_diag_message(f->diag, 1),
                        "t.yaml:2:1: only one yaml document is allowed in a config file");
    assert_string_equal(sf_diag_message(f->diag, 2), "t.yaml:3:3: the top level must be a mapping");
}

static void test_recursive_alias(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "a: &x\n  b: *x\n"), SF_CONFIG);
    assert_string_equal(sf_diag_message(f->diag, 0),
                        "t.yaml:1:4: a.b: an alias must not refer to a node that contains it");
}

static void test_deep_nesting(void **state)
{
    fx *f = *state;
    char text[400];
    size_t n = 0;

    n += (size_t)snprintf(text, sizeof(text), "a: ");
    for (int i = 0; i < 100; i++)
        text[n++] = '[';
    for (int i = 0; i < 100; i++)
        text[n++] = ']';
    text[n++] = '\n';
    text[n] = '\0';
    assert_int_equal(load(f, text), SF_CONFIG);
    assert_int_equal(sf_diag_errors(f->diag), 1);
    assert_non_null(strstr(sf_diag_message(f->diag, 0), "nesting is too deep (more than 64 levels)"));
}

/* ---- env ---- */

static const char *expand(fx *f, const char *in, sf_status want)
{
    char *out = NULL, *err = NULL;
    size_t len = 0;

    assert_int_equal(sf_env_expand(in, strlen(in), f->arena, &out, &len, &err), want);
    if (want != SF_OK)
        return err;
    assert_int_equal(len, strlen(out));
    return out;
}

static void test_env_forms(void **state)
{
    fx *f = *state;

    assert_string_equal(expand(f, "no dollars", SF_OK), "no dollars");
    assert_string_equal(expand(f, "${env:SF_T_SET}", SF_OK), "value");
    assert_string_equal(expand(f, "${SF_T_SET}", SF_OK), "value");
    assert_string_equal(expand(f, "a${env:SF_T_SET}b${SF_T_SET}c", SF_OK), "avaluebvaluec");
    assert_string_equal(expand(f, "${env:SF_T_UNSET:-dflt}", SF_OK), "dflt");
    assert_string_equal(expand(f, "${env:SF_T_UNSET:-http://h:1/p}", SF_OK), "http://h:1/p");
    assert_string_equal(expand(f, "${env:SF_T_UNSET:-}", SF_OK), "");
    assert_string_equal(expand(f, "${env:SF_T_SET:-dflt}", SF_OK), "value");
    assert_string_equal(expand(f, "${env:SF_T_EMPTY:-dflt}", SF_OK), "");   /* set, though empty */
    assert_string_equal(expand(f, "$$", SF_OK), "$");
    assert_string_equal(expand(f, "$${env:SF_T_SET}", SF_OK), "${env:SF_T_SET}");
    assert_string_equal(expand(f, "$$$$", SF_OK), "$$");
    assert_string_equal(expand(f, "cost $5 $ a$", SF_OK), "cost $5 $ a$");
}

static void test_env_errors(void **state)
{
    fx *f = *state;

    assert_string_equal(expand(f, "${env:SF_T_UNSET}", SF_CONFIG),
                        "environment variable 'SF_T_UNSET' is not set");
    assert_string_equal(expand(f, "x ${SF_T_UNSET} y", SF_CONFIG),
                        "environment variable 'SF_T_UNSET' is not set");
    assert_string_equal(expand(f, "${env:}", SF_CONFIG), "invalid environment variable name ''");
    assert_string_equal(expand(f, "${env:A-B}", SF_CONFIG), "invalid environment variable name 'A-B'");
    assert_string_equal(expand(f, "${file:/x}", SF_CONFIG),
                        "unsupported config provider 'file' (only 'env' is supported)");
    assert_string_equal(expand(f, "${env:X", SF_CONFIG), "unterminated '${' in '${env:X'");
}

static void test_env_in_tree(void **state)
{
    fx *f = *state;

    assert_int_equal(load(f, "${SF_T_SET}: ${SF_T_SET}\nq: \"${env:SF_T_SET}\"\n"
                             "l:\n  - ${env:SF_T_UNSET}\n"), SF_CONFIG);
    /* keys are not expanded, values are, quoted or not */
    assert_string_equal(text_at(f->root, "${SF_T_SET}"), "value");
    assert_true(sf_node_get(f->root, "${SF_T_SET}")->plain);
    assert_string_equal(text_at(f->root, "q"), "value");
    assert_int_equal(sf_diag_count(f->diag), 1);
    assert_string_equal(sf_diag_message(f->diag, 0),
                        "t.yaml:4:5: l[0]: environment variable 'SF_T_UNSET' is not set");
}

static sf_status load_scenario(void *arg)
{
    static const char text[] = "a: &x\n  k: ${SF_T_SET}\n  j: [1, 2]\nb:\n  <<: *x\n  c: $$\n";
    sf_arena *a = sf_arena_create(256, 0);
    sf_diag *d = sf_diag_create("t.yaml");
    sf_node *root = NULL;
    sf_status st = SF_ENOMEM;

    (void)arg;
    if (a != NULL && d != NULL) {
        st = sf_yaml_load(text, strlen(text), a, d, &root);
        if (st == SF_ENOMEM)
            assert_null(root);
    }
    sf_diag_destroy(d);
    sf_arena_destroy(a);
    return st;
}

/* Every failed allocation (arena, diag, the reader's) is SF_ENOMEM with no
 * tree and nothing leaked. */
static void test_alloc_failures(void **state)
{
    const sf_torture t = { .name = "yaml load", .run = load_scenario,
                           .expect = SF_ENOMEM };

    (void)state;
    assert_true(sf_torture_run(&t) >= 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_positions_and_kinds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alias_yields_anchored_node, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_not_a_mapping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_duplicate_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_syntax_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_and_not_mapping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recursive_alias, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deep_nesting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_forms, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_env_in_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_alloc_failures, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
