/* tests/sf_torture.h: the shared allocation-failure ("torture") loop, after
 * curl's torture mode (docs/tests/TEST-SUITE.md): run a scenario once,
 * counting its allocations, then run it again once for every N, with the
 * Nth allocation failing (sf_alloc_fail_at), and check each run fails
 * cleanly (an error status, the expected one when given) and leaks nothing
 * (sf_alloc_in_use() back to where it was). Header-only; include it after
 * <cmocka.h>.
 *
 * A scenario does the whole thing it tests, including freeing what it
 * made, and returns a status: SF_OK when nothing failed. Allocations are
 * counted process-wide, so threads the scenario starts are covered too.
 * sf_torture_create() is the scenario every component test has: its
 * type's create and destroy. */
#ifndef SF_TORTURE_H
#define SF_TORTURE_H

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/types.h>

#include "sf_alloc.h"
#include "sf_component.h"
#include "sf_status.h"

typedef struct sf_torture {
    const char *name;               /* for failure messages */
    sf_status (*run)(void *arg);
    void *arg;
    /* Fail every allocation from the Nth on, not only the Nth (for code
     * that retries, or threads that would otherwise go on allocating). */
    bool sticky;
    /* A failed allocation may be absorbed: the run may still return SF_OK
     * (it must still leak nothing). */
    bool may_succeed;
    /* The status a failing run must return; SF_OK: any error will do. */
    sf_status expect;
} sf_torture;

/* Run `t` as above. Returns how many allocations the clean run made (each
 * of which has then failed once); fails the test on a run that succeeded
 * when it must not, gave the wrong status, or leaked. */
static inline uint64_t sf_torture_run(const sf_torture *t)
{
    size_t before = sf_alloc_in_use();
    uint64_t total;
    sf_status st;

    sf_alloc_fail_at(0, 0);
    st = t->run(t->arg);
    total = sf_alloc_fail_at(0, 0);
    if (st != SF_OK)
        fail_msg("%s: the run without failures returned %s", t->name, sf_status_name(st));
    if (sf_alloc_in_use() != before)
        fail_msg("%s: the run without failures leaked %zd bytes", t->name,
                 (ssize_t)(sf_alloc_in_use() - before));
    if (total == 0)
        fail_msg("%s: the scenario allocates nothing: nothing to torture", t->name);
    for (uint64_t n = 1; n <= total; n++) {
        sf_alloc_fail_at(n, t->sticky);
        st = t->run(t->arg);
        sf_alloc_fail_at(0, 0);
        if (st == SF_OK && !t->may_succeed)
            fail_msg("%s: allocation %" PRIu64 " of %" PRIu64 " failed but the run succeeded",
                     t->name, n, total);
        if (st != SF_OK && t->expect != SF_OK && st != t->expect)
            fail_msg("%s: allocation %" PRIu64 " of %" PRIu64 " failed: %s, not %s", t->name, n,
                     total, sf_status_name(st), sf_status_name(t->expect));
        if (sf_alloc_in_use() != before)
            fail_msg("%s: allocation %" PRIu64 " of %" PRIu64 " failed and %zd bytes leaked",
                     t->name, n, total, (ssize_t)(sf_alloc_in_use() - before));
    }
    return total;
}

/* A component type's create, then destroy, on `comp` (made by hand, its
 * type and id set) with `config`, tortured: every failing create returns
 * SF_ENOMEM and leaves no context behind. `sticky` as in sf_torture. How
 * many allocations the clean create and destroy made. */
typedef struct sf_torture_create_ {
    sf_component *comp;
    const void *config;
} sf_torture_create_;

static inline sf_status sf_torture_create_run_(void *arg)
{
    sf_torture_create_ *c = arg;
    const sf_component_type *type = sf_component_type_of(c->comp);
    sf_status st = type->create(c->comp, c->config);

    if (st != SF_OK) {
        if (sf_component_ctx(c->comp) != NULL)
            fail_msg("%s: create failed (%s) and left a context", sf_component_id(c->comp),
                     sf_status_name(st));
        return st;
    }
    type->destroy(c->comp);
    sf_component_set_ctx(c->comp, NULL);
    return SF_OK;
}

static inline uint64_t sf_torture_create(sf_component *comp, const void *config, bool sticky)
{
    sf_torture_create_ c = { comp, config };
    const sf_torture t = { .name = sf_component_id(comp), .run = sf_torture_create_run_,
                           .arg = &c, .sticky = sticky, .expect = SF_ENOMEM };

    return sf_torture_run(&t);
}

#endif
