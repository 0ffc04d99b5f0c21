/* tests/pipeline/test_confmap.c: the config map decoder (sf_cfg_decode) on a
 * test-only set of rows: every row type, defaults, null handling, ranges,
 * unknown keys with did-you-mean, REJECT and IGNORE, CUSTOM callbacks, LIST
 * (a list of mappings, each decoded with its rows). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "tests/sf_test_config.h"

typedef struct inner {
    bool present;
    int64_t n;
    char *s;
} inner;

typedef struct tconf {
    char *name;
    bool on;
    int64_t count;
    double ratio;
    int64_t wait;
    int64_t size;
    int mode;
    sf_strlist list;
    sf_strmap map;
    inner sec;
    int custom;
    sf_cfg_list items;
    struct { int64_t *v; size_t n; } levels;
} tconf;

typedef struct item {
    char *id;
    int64_t weight;
} item;

static sf_status parse_custom(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    if (node->kind != SF_NODE_SCALAR || strcmp(node->text, "ok") != 0) {
        sf_cfg_error(ctx, node, "inner[1]", "custom says no to '%s'", node->text);
        return SF_CONFIG;
    }
    *(int *)field = 42;
    return SF_OK;
}

/* A CUSTOM list as components read theirs (sf_cfg_list_alloc). */
static sf_status parse_levels(sf_cfg_ctx *ctx, const sf_node *node, void *field)
{
    struct { int64_t *v; size_t n; } *out = field;
    sf_status st;

    out->v = sf_cfg_list_alloc(ctx, node, "levels", sizeof(*out->v), &st);
    if (out->v == NULL)
        return st;
    for (size_t i = 0; i < node->n; i++)
        out->v[out->n++] = strtoll(node->items[i]->text, NULL, 10);
    return SF_OK;
}

static const sf_config_row inner_rows[] = {
    { .key = "n", .type = SF_CFG_INT, .def = "7", .offset = offsetof(inner, n) },
    { .key = "s", .type = SF_CFG_STR, .def = "dflt", .offset = offsetof(inner, s) },
    { 0 }
};

static const sf_config_row item_rows[] = {
    { .key = "id", .type = SF_CFG_STR, .offset = offsetof(item, id) },
    { .key = "weight", .type = SF_CFG_INT, .def = "3", .offset = offsetof(item, weight),
      .min = 1, .max = 9 },
    { 0 }
};

static const sf_config_row rows[] = {
    { .key = "name", .type = SF_CFG_STR, .offset = offsetof(tconf, name) },
    { .key = "on", .type = SF_CFG_BOOL, .def = "true", .offset = offsetof(tconf, on) },
    { .key = "count", .type = SF_CFG_INT, .def = "10", .offset = offsetof(tconf, count),
      .min = 1, .max = 100 },
    { .key = "ratio", .type = SF_CFG_DOUBLE, .def = "0.5", .offset = offsetof(tconf, ratio),
      .dmin = 0, .dmax = 1 },
    { .key = "wait", .type = SF_CFG_DURATION, .def = "5s", .offset = offsetof(tconf, wait),
      .min = 0, .max = 60000 },
    { .key = "size", .type = SF_CFG_SIZE, .def = "1MiB", .offset = offsetof(tconf, size),
      .min = 1024, .max = 1 << 30 },
    { .key = "mode", .type = SF_CFG_ENUM, .def = "fast", .offset = offsetof(tconf, mode),
      .choices = "slow|fast|off" },
    { .key = "list", .type = SF_CFG_STRLIST, .offset = offsetof(tconf, list) },
    { .key = "map", .type = SF_CFG_STRMAP, .offset = offsetof(tconf, map) },
    { .key = "sec", .type = SF_CFG_SECTION, .offset = offsetof(tconf, sec), .sub = inner_rows },
    { .key = "custom", .type = SF_CFG_CUSTOM, .offset = offsetof(tconf, custom),
      .parse = parse_custom },
    { .key = "legacy", .type = SF_CFG_IGNORE, .offset = SF_CFG_NO_FIELD },
    { .key = "storage", .type = SF_CFG_REJECT, .offset = SF_CFG_NO_FIELD,
      .help = "storage is refused here" },
    { .key = "check_only", .type = SF_CFG_ENUM, .offset = SF_CFG_NO_FIELD, .choices = "tcp" },
    { .key = "items", .type = SF_CFG_LIST, .offset = offsetof(tconf, items), .sub = item_rows,
      .elem_size = sizeof(item) },
    { .key = "levels", .type = SF_CFG_CUSTOM, .offset = offsetof(tconf, levels),
      .parse = parse_levels },
    { 0 }
};

typedef struct fx {
    sf_test_cfg t;
    tconf c;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof(*f));

    sf_test_cfg_init(&f->t);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;

    sf_test_cfg_release(&f->t);
    free(f);
    return 0;
}

/* Decode the mapping under `x:` in `yaml` with path "x". */
static sf_status decode(fx *f, const char *yaml)
{
    return sf_test_cfg_decode(&f->t, rows, yaml, &f->c, sizeof(f->c));
}

static void expect(fx *f, const char *const *msgs)
{
    size_t n = 0;

    for (; msgs[n]; n++) {
        assert_true(n < sf_diag_count(f->t.diag));
        assert_string_equal(sf_diag_message(f->t.diag, n), msgs[n]);
    }
    assert_int_equal(sf_diag_count(f->t.diag), n);
}

static void test_defaults(void **state)
{
    fx *f = *state;

    assert_int_equal(decode(f, "x:\n"), SF_OK);
    assert_null(f->c.name);
    assert_true(f->c.on);
    assert_int_equal(f->c.count, 10);
    assert_true(f->c.ratio == 0.5);
    assert_int_equal(f->c.wait, 5000);
    assert_int_equal(f->c.size, 1 << 20);
    assert_int_equal(f->c.mode, 1);
    assert_int_equal(f->c.list.n, 0);
    assert_int_equal(f->c.map.n, 0);
    assert_false(f->c.sec.present);             /* absent section: defaults, not present */
    assert_int_equal(f->c.sec.n, 7);
    assert_string_equal(f->c.sec.s, "dflt");
    assert_int_equal(f->c.custom, 0);
    assert_int_equal(sf_diag_count(f->t.diag), 0);
}

static void test_values(void **state)
{
    fx *f = *state;

    assert_int_equal(decode(f, "x:\n  name: 123\n  on: FALSE\n  count: 100\n  ratio: 1e-1\n"
                               "  wait: 1m\n  size: 64KiB\n  mode: off\n  list: [a, 'b', 3]\n"
                               "  map: {k: v, n: 1, e: ~}\n  sec:\n    n: -0\n  custom: ok\n"
                               "  check_only: tcp\n"), SF_OK);
    assert_string_equal(f->c.name, "123");      /* a number is fine as a string */
    assert_false(f->c.on);
    assert_int_equal(f->c.count, 100);
    assert_true(f->c.ratio == 0.1);
    assert_int_equal(f->c.wait, 60000);
    assert_int_equal(f->c.size, 65536);
    assert_int_equal(f->c.mode, 2);
    assert_int_equal(f->c.list.n, 3);
    assert_string_equal(f->c.list.v[1], "b");
    assert_string_equal(f->c.list.v[2], "3");
    assert_int_equal(f->c.map.n, 3);
    assert_string_equal(f->c.map.keys[1], "n");
    assert_string_equal(f->c.map.values[1], "1");
    assert_string_equal(f->c.map.values[2], "");
    assert_true(f->c.sec.present);
    assert_int_equal(f->c.sec.n, 0);
    assert_string_equal(f->c.sec.s, "dflt");
    assert_int_equal(f->c.custom, 42);
    assert_int_equal(sf_diag_count(f->t.diag), 0);
}

static void test_null_section_is_present(void **state)
{
    fx *f = *state;

    assert_int_equal(decode(f, "x:\n  sec:\n  count: ~\n"), SF_OK);
    assert_true(f->c.sec.present);
    assert_int_equal(f->c.sec.n, 7);
    assert_int_equal(f->c.count, 10);           /* null scalar: the default */
}

static void test_all_errors_sorted(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = {
        "t.yaml:2:9: x.name: expected a string, got a list",
        "t.yaml:3:7: x.on: invalid boolean 'yes' (expected true or false)",
        "t.yaml:4:10: x.count: invalid integer '1.5'",
        "t.yaml:5:10: x.ratio: invalid number 'nan'",
        "t.yaml:6:9: x.wait: duration needs a unit, e.g. '5s'",
        "t.yaml:7:9: x.size: invalid size '1 KiB' (expected e.g. '512MiB', '64KiB', '10MB' or a number of bytes)",
        "t.yaml:8:9: x.mode: unknown value 'quick' (expected one of 'slow', 'fast', 'off')",
        "t.yaml:9:9: x.list: expected a list of strings, got a single value",
        "t.yaml:10:8: x.map: expected a mapping of names to strings, got a list",
        "t.yaml:11:8: x.sec: expected a mapping, got a single value",
        "t.yaml:12:11: x.custom.inner[1]: custom says no to 'no'",
        "t.yaml:13:15: x.check_only: unknown value 'udp' (expected one of 'tcp')",
        NULL
    };

    /* rows are decoded in row order, messages come out in file order */
    assert_int_equal(decode(f, "x:\n  name: [a]\n  on: yes\n  count: 1.5\n  ratio: nan\n"
                               "  wait: 30\n  size: 1 KiB\n  mode: quick\n  list: a\n  map: [a]\n"
                               "  sec: 5\n  custom: no\n  check_only: udp\n"), SF_CONFIG);
    expect(f, msgs);
    assert_int_equal(sf_diag_errors(f->t.diag), 12);
}

static void test_list_of_mappings(void **state)
{
    fx *f = *state;
    const item *it;
    static const char *const msgs[] = {
        "t.yaml:5:7: x.items[2]: unknown key 'wieght' (did you mean 'weight'?)",
        "t.yaml:6:15: x.items[3].weight: value '10' is out of range (expected 1 to 9)",
        "t.yaml:7:7: x.items[4]: expected a mapping, got a single value",
        NULL
    };

    assert_int_equal(decode(f, "x:\n  items:\n    - {id: a}\n    - {id: b, weight: 9}\n"),
                     SF_OK);
    assert_int_equal(f->c.items.n, 2);
    it = f->c.items.v;
    assert_string_equal(it[0].id, "a");
    assert_int_equal(it[0].weight, 3);          /* the default, per element */
    assert_int_equal(it[1].weight, 9);
    assert_int_equal(decode(f, "x:\n  items:\n"), SF_OK);
    assert_int_equal(f->c.items.n, 0);
    sf_test_cfg_reset_diag(&f->t);
    assert_int_equal(decode(f, "x:\n  items:\n    - {id: a}\n    - {id: b}\n"
                               "    - wieght: 2\n    - weight: 10\n    - plain\n"), SF_CONFIG);
    expect(f, msgs);
    sf_test_cfg_reset_diag(&f->t);
    assert_int_equal(decode(f, "x:\n  items: {id: a}\n"), SF_CONFIG);
    assert_string_equal(sf_diag_message(f->t.diag, 0),
                        "t.yaml:2:10: x.items: expected a list of mappings, got a mapping");
}

static void test_custom_list(void **state)
{
    fx *f = *state;

    assert_int_equal(decode(f, "x:\n  levels: [3, 0, 7]\n"), SF_OK);
    assert_int_equal(f->c.levels.n, 3);
    assert_int_equal(f->c.levels.v[0], 3);
    assert_int_equal(f->c.levels.v[2], 7);
    assert_int_equal(decode(f, "x:\n  levels:\n"), SF_OK);    /* null: an empty list */
    assert_null(f->c.levels.v);
    assert_int_equal(f->c.levels.n, 0);
    assert_int_equal(decode(f, "x:\n  levels: []\n"), SF_OK);
    assert_int_equal(f->c.levels.n, 0);
    assert_int_equal(sf_diag_count(f->t.diag), 0);
    assert_int_equal(decode(f, "x:\n  levels: 3\n"), SF_CONFIG);
    assert_string_equal(sf_diag_message(f->t.diag, 0),
                        "t.yaml:2:11: x.levels: expected a list of levels");
}

static void test_list_item_error(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = {
        "t.yaml:4:7: x.list[1]: expected a string, got a mapping",
        "t.yaml:5:6: x.list[2]: expected a string, got an empty value",
        "t.yaml:7:8: x.map.b: expected a string, got a list",
        NULL
    };

    assert_int_equal(decode(f, "x:\n  list:\n    - a\n    - {b: c}\n    -\n  map:\n    b: []\n"),
                     SF_CONFIG);
    expect(f, msgs);
}

static void test_ranges(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = {
        "t.yaml:2:10: x.count: value '0' is out of range (expected 1 to 100)",
        "t.yaml:3:10: x.ratio: value '1.01' is out of range (expected 0 to 1)",
        "t.yaml:4:9: x.wait: duration '61s' is out of range (expected 0s to 1m)",
        "t.yaml:5:9: x.size: size '1023' is out of range (expected 1KiB to 1GiB)",
        NULL
    };

    assert_int_equal(decode(f, "x:\n  count: 0\n  ratio: 1.01\n  wait: 61s\n  size: 1023\n"),
                     SF_CONFIG);
    expect(f, msgs);
}

static void test_range_edges_pass(void **state)
{
    fx *f = *state;

    assert_int_equal(decode(f, "x:\n  count: 1\n  ratio: 0\n  wait: 0\n  size: 1KiB\n"), SF_OK);
    assert_int_equal(f->c.count, 1);
    assert_int_equal(f->c.wait, 0);
    assert_int_equal(f->c.size, 1024);
    assert_int_equal(decode(f, "x:\n  count: 100\n  ratio: 1\n  wait: 1m\n  size: 1GiB\n"), SF_OK);
}

static void test_unknown_keys(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = {
        "t.yaml:2:3: x: unknown key 'cuont' (did you mean 'count'?)",
        "t.yaml:3:3: x: unknown key 'NAME' (did you mean 'name'?)",
        "t.yaml:4:3: x: unknown key 'zebra'",
        "t.yaml:6:5: x.sec: unknown key 'nn'",   /* one-letter keys get no hint */
        NULL
    };

    assert_int_equal(decode(f, "x:\n  cuont: 1\n  NAME: a\n  zebra: 1\n  sec:\n    nn: 1\n"),
                     SF_CONFIG);
    expect(f, msgs);
}

static void test_reject_and_ignore(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = {
        "t.yaml:2:3: x.legacy: warning: 'legacy' has no effect in spanfence",
        "t.yaml:3:3: x.storage: storage is refused here",
        NULL
    };

    assert_int_equal(decode(f, "x:\n  legacy: {a: 1}\n  storage: disk\n"), SF_CONFIG);
    expect(f, msgs);
    assert_int_equal(sf_diag_errors(f->t.diag), 1);
    assert_int_equal(sf_diag_warnings(f->t.diag), 1);
}

static void test_not_a_mapping(void **state)
{
    fx *f = *state;
    static const char *const msgs[] = { "t.yaml:1:4: x: expected a mapping, got a list", NULL };

    assert_int_equal(decode(f, "x: [1]\n"), SF_CONFIG);
    expect(f, msgs);
}

static void test_suggest(void **state)
{
    static const char *const c[] = { "receivers", "processors", "exporters", "service" };

    (void)state;
    assert_int_equal(sf_edit_distance("recievers", "receivers"), 1);
    assert_int_equal(sf_edit_distance("abc", ""), 3);
    assert_int_equal(sf_edit_distance("kitten", "sitting"), 3);
    assert_string_equal(sf_cfg_suggest("recievers", c, 4), "receivers");
    assert_string_equal(sf_cfg_suggest("SERVICE", c, 4), "service");
    assert_string_equal(sf_cfg_suggest("exportrs", c, 4), "exporters");
    assert_null(sf_cfg_suggest("pipelines", c, 4));
    assert_null(sf_cfg_suggest("x", c, 4));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
        cmocka_unit_test_setup_teardown(test_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_null_section_is_present, setup, teardown),
        cmocka_unit_test_setup_teardown(test_all_errors_sorted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_item_error, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ranges, setup, teardown),
        cmocka_unit_test_setup_teardown(test_range_edges_pass, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_keys, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reject_and_ignore, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_a_mapping, setup, teardown),
        cmocka_unit_test_setup_teardown(test_list_of_mappings, setup, teardown),
        cmocka_unit_test_setup_teardown(test_custom_list, setup, teardown),
        cmocka_unit_test(test_suggest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
