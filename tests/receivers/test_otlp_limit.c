/* tests/receivers/test_otlp_limit.c: the token bucket of the `otlp`
 * receiver's per-connection rate limits (receivers/otlp/otlp_limit.h):
 * frames past a burst are refused until time refills it at its rate, a
 * balance never banks more than the burst, decompression's charge after
 * the fact may go into debt (bounded) and closes the bucket until it is
 * paid back, and every close reason has its metric label; the clients'
 * table: one decompression budget per client whatever its connections, a
 * client refused persistently is told to close, and a table full of
 * clients in debt does not forgive a debt to make room. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include <cmocka.h>

#include "receivers/otlp/otlp_limit.h"
#include "sf_alloc.h"
#include "sf_time.h"

static void frames_past_the_burst_wait_for_the_rate(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    sf_otlp_bucket_init(&b, 100, 1000);
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 1000))
        taken++;
    assert_int_equal(taken, 100);
    /* 100 a second: 5 ms gives none back yet, 10 ms one, 500 ms fifty */
    assert_false(sf_otlp_bucket_take(&b, 1, 100, 100, 1005));
    assert_true(sf_otlp_bucket_take(&b, 1, 100, 100, 1010));
    assert_false(sf_otlp_bucket_take(&b, 1, 100, 100, 1010));
    taken = 0;
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 1510))
        taken++;
    assert_int_equal(taken, 50);
}

static void a_sustained_rate_is_held_to_the_limit(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    /* 1,000 frames a second offered for 10 s against 100 + 100/s: 1,100 pass */
    sf_otlp_bucket_init(&b, 100, 0);
    for (int64_t ms = 0; ms < 10000; ms++)
        taken += sf_otlp_bucket_take(&b, 1, 100, 100, ms);
    assert_in_range(taken, 1090, 1100);
}

static void an_idle_bucket_banks_no_more_than_its_burst(void **state)
{
    sf_otlp_bucket b;
    int taken = 0;

    (void)state;
    sf_otlp_bucket_init(&b, 0, 0);
    while (sf_otlp_bucket_take(&b, 1, 100, 100, 3600 * 1000))
        taken++;
    assert_int_equal(taken, 100);
}

static void decompression_goes_into_debt_and_pays_it_back(void **state)
{
    const int64_t rate = 8 << 20, most = 20 << 20;
    sf_otlp_bucket b;

    (void)state;
    /* A new connection: one message of any size at once... */
    sf_otlp_bucket_init(&b, 1, 0);
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 0));
    sf_otlp_bucket_charge(&b, 20 << 20, most);
    /* ...then nothing until its 20 MiB are paid back at 8 MiB/s (2.5 s) */
    assert_false(sf_otlp_bucket_open(&b, rate, rate, 1000));
    assert_false(sf_otlp_bucket_open(&b, rate, rate, 2400));
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 2600));
    /* the debt is bounded: a charge past it costs at most `most` */
    sf_otlp_bucket_charge(&b, INT64_MAX / 2, most);
    assert_true(b.tokens >= -most);
    assert_true(sf_otlp_bucket_open(&b, rate, rate, 2600 + 2600));
}

static void one_decompression_budget_per_client(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(20 << 20);
    unsigned slot;
    bool close;

    (void)state;
    assert_non_null(t);
    /* client 7's first message at once, 20 MiB of it... */
    assert_true(sf_otlp_inflate_open(t, 7, 1000, 1000, &slot, &close));
    sf_otlp_inflate_charge(t, slot, 20 << 20);
    /* ...then 7 is in debt, whichever connection it calls on (the key is
     * the client's), while client 8 has its own budget */
    assert_false(sf_otlp_inflate_open(t, 7, 1001, 1001, &slot, &close));
    assert_false(close);
    assert_true(sf_otlp_inflate_open(t, 8, 1001, 1001, &slot, &close));
    sf_otlp_inflate_charge(t, slot, 1000);
    /* 20 MiB less its first 1 MiB at 8 MiB/s: paid back after 2.4 s */
    assert_false(sf_otlp_inflate_open(t, 7, 3300, 3300, &slot, &close));
    assert_true(sf_otlp_inflate_open(t, 7, 3600, 3600, &slot, &close));
    sf_otlp_inflate_charge(t, slot, 0);
    /* a charge without asking (a refused message counted) is the client's
     * too; 8 banked 21.8 MiB meanwhile, each charge is at most 20 */
    sf_otlp_inflate_charge_client(t, 8, (size_t)1 << 40, 3600);
    sf_otlp_inflate_charge_client(t, 8, (size_t)1 << 40, 3600);
    assert_false(sf_otlp_inflate_open(t, 8, 3601, 3601, &slot, &close));
    /* bounded by debt_max: 20 MiB back in 2.5 s */
    assert_true(sf_otlp_inflate_open(t, 8, 3601 + 2600, 3601 + 2600, &slot, &close));
    sf_otlp_inflate_charge(t, slot, 0);
    sf_otlp_clients_destroy(t);
}

static void a_client_refused_persistently_is_closed(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(20 << 20);
    unsigned slot;
    bool close = false;
    int refused = 0;

    (void)state;
    assert_true(sf_otlp_inflate_open(t, 9, 0, 0, &slot, &close));
    sf_otlp_inflate_charge(t, slot, 20 << 20);
    /* refusals each within 1 s of the last: the one past the strikes closes */
    for (int64_t ms = 1; ms < 100 && !close; ms++) {
        assert_false(sf_otlp_inflate_open(t, 9, ms, ms, &slot, &close));
        refused++;
    }
    assert_true(close);
    assert_int_equal(refused, SF_OTLP_INFLATE_STRIKES + 1);
    /* the strikes start again */
    assert_false(sf_otlp_inflate_open(t, 9, 200, 200, &slot, &close));
    assert_false(close);
    sf_otlp_clients_destroy(t);
}

static void a_debt_is_not_forgiven_to_make_room(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(20 << 20);
    unsigned slot, overflow = 0;
    bool close;

    (void)state;
    /* every client in debt: the table fills, then newcomers share the
     * overflow entry instead of taking a debtor's */
    for (uint64_t k = 1; k <= 4 * SF_OTLP_CLIENT_SLOTS; k++) {
        if (!sf_otlp_inflate_open(t, k * 2654435761u, 0, 0, &slot, &close))
            continue;               /* the shared overflow, in debt already */
        if (slot == SF_OTLP_CLIENT_SLOTS)
            overflow++;
        sf_otlp_inflate_charge(t, slot, 20 << 20);
    }
    assert_int_equal(overflow, 1);
    for (uint64_t k = 1; k <= 8; k++)
        assert_false(sf_otlp_inflate_open(t, k * 2654435761u, 1, 1, &slot, &close));
    /* once paid back, an entry may go to a newcomer */
    assert_true(sf_otlp_inflate_open(t, 99991, 10000, 10000, &slot, &close));
    assert_true(slot < SF_OTLP_CLIENT_SLOTS);
    sf_otlp_inflate_charge(t, slot, 0);
    sf_otlp_clients_destroy(t);
}

static void a_client_over_its_share_of_held_bytes(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(4 << 20);
    sf_otlp_hold flood[3] = { { 0, 0 } }, moderate = { 0, 0 };
    size_t share, clients, held;

    (void)state;
    /* no capacity (no memory limit): nobody is over a share */
    sf_otlp_hold_set(t, 11, &flood[0], 40 << 20, 0);
    assert_false(sf_otlp_over_share(t, 11));
    /* 49 MiB held by two clients: a share of 24.5 MiB each; the flooder's
     * three messages count together, the moderate client's 1 MiB is well
     * under */
    sf_otlp_clients_set_capacity(t, 64 << 20);
    sf_otlp_hold_set(t, 11, &flood[1], 4 << 20, 0);
    sf_otlp_hold_set(t, 11, &flood[2], 4 << 20, 0);
    sf_otlp_hold_set(t, 12, &moderate, 1 << 20, 0);
    assert_true(sf_otlp_over_share(t, 11));
    assert_false(sf_otlp_over_share(t, 12));
    assert_false(sf_otlp_over_share(t, 13));        /* holds nothing */
    assert_int_equal(sf_otlp_held(t, 11), 48 << 20);
    assert_int_equal(sf_otlp_held(t, 12), 1 << 20);
    assert_int_equal(sf_otlp_held(t, 13), 0);
    sf_otlp_share_state(t, &share, &clients, &held);
    assert_int_equal(share, (49 << 20) / 2);
    assert_int_equal(clients, 2);
    assert_int_equal(held, (48 << 20) + (1 << 20));
    /* reclaimed down to 4 MiB, the flooder still holds more than the
     * other (a share of 2.5 MiB)... */
    sf_otlp_hold_set(t, 11, &flood[0], 0, 1);
    sf_otlp_hold_set(t, 11, &flood[1], 0, 1);
    assert_true(sf_otlp_over_share(t, 11));
    /* ...at 2 MiB it is within the floor (a 32nd of 64 MiB) */
    sf_otlp_hold_set(t, 11, &flood[2], 2 << 20, 1);
    assert_false(sf_otlp_over_share(t, 11));
    /* given back whole: nothing held, no holder */
    sf_otlp_hold_set(t, 11, &flood[2], 0, 1);
    sf_otlp_hold_set(t, 12, &moderate, 0, 1);
    sf_otlp_share_state(t, &share, &clients, &held);
    assert_int_equal(clients, 0);
    assert_int_equal(held, 0);
    sf_otlp_clients_destroy(t);
}

static void many_small_holders_leave_a_moderate_client_its_floor(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(4 << 20);
    sf_otlp_hold h[200], moderate = { 0, 0 };

    (void)state;
    memset(h, 0, sizeof(h));
    sf_otlp_clients_set_capacity(t, 64 << 20);
    /* 200 connections of a flooder on loopback, 64 KiB each: the share is
     * not what they hold / 201 but at least a 32nd of 64 MiB (2 MiB), so
     * an upload of 2 MiB is not over it */
    for (uint64_t k = 0; k < 200; k++)
        sf_otlp_hold_set(t, 1000 + k * 7919, &h[k], 64 << 10, 0);
    sf_otlp_hold_set(t, 12, &moderate, 2 << 20, 0);
    assert_false(sf_otlp_over_share(t, 12));
    assert_false(sf_otlp_over_share(t, 1000));
    sf_otlp_hold_set(t, 12, &moderate, (2 << 20) + 1, 0);
    assert_true(sf_otlp_over_share(t, 12));
    /* an entry holding bytes is not handed on: each gives back to its own */
    for (uint64_t k = 0; k < 200; k++)
        sf_otlp_hold_set(t, 1000 + k * 7919, &h[k], 0, 100000);
    sf_otlp_hold_set(t, 12, &moderate, 0, 100000);
    {
        size_t share, clients, held;

        sf_otlp_share_state(t, &share, &clients, &held);
        assert_int_equal(clients, 0);
        assert_int_equal(held, 0);
    }
    sf_otlp_clients_destroy(t);
}

/* 12 connections of a flooder holding 3.75 MiB each are each at the
 * share (their mean), none over it; a client under its share that waits
 * for 0.9 MB lowers the share, while it waits, to what it will hold (never
 * below the floor): the flooder's connections are then over it. */
static void a_waiting_client_lowers_the_share_to_what_it_will_hold(void **state)
{
    sf_otlp_clients *t = sf_otlp_clients_create(4 << 20);
    sf_otlp_hold h[12];
    int64_t now = sf_now_ms();
    size_t share, clients, held;

    (void)state;
    memset(h, 0, sizeof(h));
    sf_otlp_clients_set_capacity(t, 64 << 20);
    for (uint64_t k = 0; k < 12; k++)
        sf_otlp_hold_set(t, 1000 + k, &h[k], (size_t)15 << 18, now);
    assert_false(sf_otlp_any_over_share(t));
    /* a flooder's connection asking is not under its share: nothing
     * changes */
    sf_otlp_hold_set(t, 1000, &h[0], (size_t)16 << 18, now);
    assert_true(sf_otlp_over_share(t, 1000));
    assert_false(sf_otlp_want(t, 1000, 4 << 20, now));
    assert_false(sf_otlp_over_share(t, 1001));
    sf_otlp_hold_set(t, 1000, &h[0], (size_t)15 << 18, now);
    /* the moderate client (holding nothing yet) asks for 0.9 MB: the
     * share is the floor (2 MiB, a 32nd of 64 MiB, over the 0.9 MB it
     * will hold) */
    assert_true(sf_otlp_want(t, 12, 900000, now));
    sf_otlp_share_state(t, &share, &clients, &held);
    assert_int_equal(share, 2 << 20);
    for (uint64_t k = 0; k < 12; k++)
        assert_true(sf_otlp_over_share(t, 1000 + k));
    assert_false(sf_otlp_over_share(t, 12));
    /* a larger ask does not raise it while the lower one stands */
    assert_true(sf_otlp_want(t, 13, 3 << 20, now));
    sf_otlp_share_state(t, &share, &clients, &held);
    assert_int_equal(share, 2 << 20);
    sf_otlp_clients_destroy(t);

    /* an ask lapses after SF_OTLP_WANT_MS: one made that long ago leaves
     * the share the mean */
    t = sf_otlp_clients_create(4 << 20);
    memset(h, 0, sizeof(h));
    sf_otlp_clients_set_capacity(t, 64 << 20);
    for (uint64_t k = 0; k < 12; k++)
        sf_otlp_hold_set(t, 1000 + k, &h[k], (size_t)15 << 18, now);
    assert_true(sf_otlp_want(t, 12, 900000, now - SF_OTLP_WANT_MS - 1));
    assert_false(sf_otlp_any_over_share(t));
    for (uint64_t k = 0; k < 12; k++)
        sf_otlp_hold_set(t, 1000 + k, &h[k], 0, now);
    sf_otlp_clients_destroy(t);
}

typedef struct giver {
    sf_otlp_clients *t;
    atomic_bool done;
} giver;

/* Holds a byte and gives it back, over and over, until told to stop. */
static void *give_back(void *arg)
{
    giver *g = arg;
    sf_otlp_hold h = { 0, 0 };

    while (!atomic_load(&g->done)) {
        sf_otlp_hold_set(g->t, 77, &h, 1, 0);
        sf_otlp_hold_set(g->t, 77, &h, 0, 0);
    }
    return NULL;
}

/* A waiter (an HTTP request waiting for the gRPC server's reclaim) wakes
 * when held bytes are given back, not at its deadline (a minute off). */
static void a_waiter_wakes_when_bytes_are_given_back(void **state)
{
    giver g = { .t = sf_otlp_clients_create(4 << 20) };
    pthread_t th;
    int64_t until = sf_now_ms() + 60000;

    (void)state;
    atomic_init(&g.done, false);
    assert_int_equal(pthread_create(&th, NULL, give_back, &g), 0);
    sf_otlp_wait_given(g.t, until);
    assert_true(sf_now_ms() < until);
    atomic_store(&g.done, true);
    pthread_join(th, NULL);
    sf_otlp_clients_destroy(g.t);
}

static void every_reason_has_a_label(void **state)
{
    (void)state;
    for (int k = 0; k < SF_OTLP_CLOSE_COUNT; k++) {
        const char *l = sf_otlp_close_label((sf_otlp_close)k);

        assert_non_null(l);
        assert_true(strlen(l) > 0);
        assert_string_not_equal(l, "unknown");
        for (int j = 0; j < k; j++)
            assert_string_not_equal(l, sf_otlp_close_label((sf_otlp_close)j));
    }
    assert_string_equal(sf_otlp_close_label(SF_OTLP_CLOSE_DECOMPRESSION), "decompression");
    assert_string_equal(sf_otlp_close_label(SF_OTLP_CLOSE_COUNT), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(frames_past_the_burst_wait_for_the_rate),
        cmocka_unit_test(a_sustained_rate_is_held_to_the_limit),
        cmocka_unit_test(an_idle_bucket_banks_no_more_than_its_burst),
        cmocka_unit_test(decompression_goes_into_debt_and_pays_it_back),
        cmocka_unit_test(one_decompression_budget_per_client),
        cmocka_unit_test(a_client_refused_persistently_is_closed),
        cmocka_unit_test(a_debt_is_not_forgiven_to_make_room),
        cmocka_unit_test(a_client_over_its_share_of_held_bytes),
        cmocka_unit_test(many_small_holders_leave_a_moderate_client_its_floor),
        cmocka_unit_test(a_waiting_client_lowers_the_share_to_what_it_will_hold),
        cmocka_unit_test(a_waiter_wakes_when_bytes_are_given_back),
        cmocka_unit_test(every_reason_has_a_label),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
