/* tests/pipeline/test_share.c: a bounded resource's fair shares between
 * clients (sf_share.h): nobody refused at most half full; above it, a
 * client over capacity / clients refused while a moderate one still gets
 * in; a client holding nothing always admitted; given-back units free the
 * room; client 0 never charged; a full table of clients. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sf_share.h"

/* Below half full nobody is refused, whatever it holds. */
static void test_no_pressure(void **state)
{
    sf_share *sh = sf_share_create(100);

    (void)state;
    assert_non_null(sh);
    for (size_t used = 0; used + 10 <= 50; used += 10)
        assert_true(sf_share_take(sh, 1, 10, used));
    assert_int_equal(sf_share_clients(sh), 1);
    assert_int_equal(sf_share_fair(sh), 100);
    sf_share_destroy(sh);
}

/* Two clients: the flooder holding 50 of 100 (its share) may go on only
 * while the moderate one, holding 10, keeps the room it is owed (its share
 * less its 10: 40); then it is refused and the moderate one still gets in;
 * both counted active. */
static void test_flooder_refused_first(void **state)
{
    sf_share *sh = sf_share_create(100);

    (void)state;
    assert_true(sf_share_take(sh, 7, 50, 0));       /* to half full: no pressure */
    assert_true(sf_share_take(sh, 9, 10, 50));      /* a newcomer holds nothing */
    assert_int_equal(sf_share_clients(sh), 2);
    assert_int_equal(sf_share_fair(sh), 50);
    assert_false(sf_share_over(sh, 7, 49));         /* one more stays within half: no pressure */
    assert_false(sf_share_over(sh, 7, 59));         /* 59 + 1 + 40 owed = 100 */
    assert_true(sf_share_over(sh, 7, 60));          /* 60 + 1 + 40 > 100 */
    assert_false(sf_share_over(sh, 9, 60));
    assert_false(sf_share_over(sh, 0, 99));
    assert_false(sf_share_over(sh, 12345, 99));     /* unknown: holds nothing */
    assert_false(sf_share_take(sh, 7, 1, 60));
    assert_true(sf_share_take(sh, 9, 10, 60));      /* 20 <= 50 */
    assert_true(sf_share_take(sh, 9, 30, 70));      /* 50 <= 50 */
    /* past its share but not twice what the other holds: the share does not
     * refuse it (a full queue does, by its capacity) */
    assert_false(sf_share_over(sh, 9, 100));
    /* the flooder's batches drain: room for it again */
    sf_share_give(sh, 7, 10);
    assert_true(sf_share_take(sh, 7, 10, 90));
    /* giving back more than held stops at zero */
    sf_share_give(sh, 9, 1000);
    assert_true(sf_share_take(sh, 9, 50, 90));
    sf_share_destroy(sh);
}

/* The room a gatherer grants past the capacity (sf_share_set_reserve)
 * counts as the resource's: the same flooder is within its share while
 * the reserve lasts and refused once it is taken back. (With the seed's
 * 32 requests the share was of the 32 alone while the queue held a
 * gatherer's request more, and refused a call of one of eight equal
 * clients a queue of 32 + 1,000 had room for.) */
static void test_reserve_is_room(void **state)
{
    sf_share *sh = sf_share_create(100);

    (void)state;
    assert_true(sf_share_take(sh, 7, 50, 0));
    assert_true(sf_share_take(sh, 9, 10, 50));
    assert_true(sf_share_over(sh, 7, 60));          /* 60 + 1 + 40 owed > 100 */
    sf_share_set_reserve(sh, 100);
    assert_int_equal(sf_share_fair(sh), 100);
    assert_false(sf_share_over(sh, 7, 60));         /* under half of 200 */
    assert_false(sf_share_over(sh, 7, 110));        /* 51 is within its share, 100 */
    assert_true(sf_share_take(sh, 7, 50, 60));
    assert_true(sf_share_over(sh, 7, 110));         /* 101 is not, and 111 + 90 owed > 200 */
    sf_share_set_reserve(sh, 0);
    assert_int_equal(sf_share_fair(sh), 50);
    assert_false(sf_share_take(sh, 7, 1, 60));
    assert_true(sf_share_take(sh, 9, 1, 60));
    sf_share_destroy(sh);
}

/* Eight clients of equal rates on a queue of 64 (share 8), each near its
 * share: one ahead is not refused up to twice the others' average, though
 * they are owed room (each under its share is owed the rest of it); past
 * that, what it adds may not eat their room, and they still get in; two
 * that drained are owed their whole share. (The rule "over its share above
 * half full" refused 7 % of eight equal connections' calls at a queue a
 * slow consumer kept over half full, with room to spare.) */
static void test_equal_clients_a_little_ahead(void **state)
{
    sf_share *sh = sf_share_create(64);
    size_t used = 0;

    (void)state;
    for (uint64_t c = 1; c <= 8; c++) {
        assert_true(sf_share_take(sh, c, 6, used));
        used += 6;
    }
    assert_int_equal(sf_share_fair(sh), 8);
    /* 48 of 64: client 1 runs ahead to 12, twice the others' average */
    for (int i = 0; i < 3; i++) {
        assert_false(sf_share_over(sh, 1, used));
        assert_true(sf_share_take(sh, 1, 2, used));
        used += 2;
    }
    /* 54: past twice the average, and 54 + 2 + 7 * 2 owed > 64 */
    assert_true(sf_share_over(sh, 1, used));
    assert_false(sf_share_take(sh, 1, 2, used));
    assert_false(sf_share_over(sh, 4, used));       /* 6 + 1 <= its share */
    for (uint64_t c = 2; c <= 8; c++) {             /* the others get in */
        assert_true(sf_share_take(sh, c, 1, used));
        used++;
    }
    /* 61: clients 2 and 3 drain to nothing, each owed its share, 8 */
    sf_share_give(sh, 2, 7);
    sf_share_give(sh, 3, 7);
    used -= 14;                                     /* 47 */
    assert_true(sf_share_over(sh, 1, used));        /* 47 + 1 + 16 + 5 * 1 > 64 */
    assert_true(sf_share_take(sh, 2, 8, used));     /* the moderate ones get their room */
    used += 8;
    assert_true(sf_share_take(sh, 3, 8, used));
    sf_share_destroy(sh);
}

/* Eight clients of equal rates, one a batch ahead while another has just
 * drained (owed its share): the one ahead holds 10 against the others'
 * average of 6.9, not twice it, so it is not refused though what it adds
 * eats into the room owed; at twice the average it is. */
static void test_a_batch_ahead_is_not_a_flooder(void **state)
{
    sf_share *sh = sf_share_create(64);
    size_t used = 0;

    (void)state;
    for (uint64_t c = 1; c <= 8; c++) {
        assert_true(sf_share_take(sh, c, c == 8 ? 1 : 8, used));
        used += c == 8 ? 1 : 8;
    }
    sf_share_give(sh, 8, 1);
    used--;                                 /* 56: client 8 owed 8 */
    assert_false(sf_share_over(sh, 1, used));       /* 9 * 7 <= 2 * 48 */
    assert_true(sf_share_take(sh, 1, 2, used));
    used += 2;
    for (uint64_t c = 2; c <= 7; c++)       /* the others drain to 2: average 12/7 */
        sf_share_give(sh, c, 6);
    used -= 36;                             /* 22 */
    assert_false(sf_share_over(sh, 1, used));       /* under half full */
    assert_true(sf_share_over(sh, 1, 40));          /* 11 * 7 > 2 * 12, 40 + 1 + 8 + 6 * 6 > 64 */
    sf_share_destroy(sh);
}

/* A queue too small to divide: eight clients, a share of 4 units, under
 * SF_SHARE_MIN: only the capacity applies, however uneven they are. */
static void test_too_small_to_divide(void **state)
{
    sf_share *sh = sf_share_create(32);
    size_t used = 0;

    (void)state;
    for (uint64_t c = 2; c <= 8; c++) {
        assert_true(sf_share_take(sh, c, 1, used));
        used++;
    }
    assert_int_equal(sf_share_fair(sh), 4);
    while (used < 32) {
        assert_true(sf_share_take(sh, 1, 1, used));
        used++;
    }
    sf_share_destroy(sh);
}

/* A client holding nothing is admitted even far over half full (the
 * capacity is the queue's to enforce); client 0 is never refused or
 * counted. */
static void test_empty_client_and_nobody(void **state)
{
    sf_share *sh = sf_share_create(100);

    (void)state;
    assert_true(sf_share_take(sh, 1, 90, 0));
    assert_true(sf_share_take(sh, 2, 5, 90));
    assert_true(sf_share_take(sh, 0, 5, 95));
    assert_true(sf_share_take(sh, 0, 5, 99));
    assert_int_equal(sf_share_clients(sh), 2);
    sf_share_give(sh, 0, 5);
    sf_share_charge(sh, 0, 5);
    assert_int_equal(sf_share_clients(sh), 2);
    sf_share_destroy(sh);
}

/* The share never falls under a 64th of the capacity: with 200 active
 * clients each may still hold 1000 / 64 = 15 units. */
static void test_floor(void **state)
{
    sf_share *sh = sf_share_create(1000);

    (void)state;
    for (uint64_t c = 1; c <= 200; c++)
        assert_true(sf_share_take(sh, c, 1, 0));
    assert_int_equal(sf_share_clients(sh), 200);
    assert_int_equal(sf_share_fair(sh), 1000 / SF_SHARE_FLOOR_DIV);
    assert_true(sf_share_take(sh, 1, 14, 600));     /* 15 */
    assert_false(sf_share_take(sh, 1, 1, 600));     /* 16 */
    sf_share_destroy(sh);
}

/* More clients holding units than the table has entries: the newcomer is
 * admitted uncharged below half full, refused above; once an entry's units
 * are given back it is still held for the idle time, never reused while it
 * holds units. */
static void test_table_full(void **state)
{
    sf_share *sh = sf_share_create(100000);

    (void)state;
    for (uint64_t c = 1; c <= SF_SHARE_SLOTS; c++)
        assert_true(sf_share_take(sh, c, 1, 0));
    assert_int_equal(sf_share_clients(sh), SF_SHARE_SLOTS);
    assert_true(sf_share_take(sh, 5000, 1, 10));
    assert_false(sf_share_take(sh, 5000, 1, 60000));
    /* the charges of those in the table are untouched */
    sf_share_give(sh, 5000, 1);
    assert_int_equal(sf_share_clients(sh), SF_SHARE_SLOTS);
    sf_share_destroy(sh);
}

/* Every entry taken by clients that hold nothing but called lately: a
 * newcomer takes the one seen least recently, and is charged there. */
static void test_table_of_recent_clients(void **state)
{
    sf_share *sh = sf_share_create(100000);

    (void)state;
    for (uint64_t c = 1; c <= SF_SHARE_SLOTS; c++) {
        assert_true(sf_share_take(sh, c, 1, 0));
        sf_share_give(sh, c, 1);
    }
    assert_int_equal(sf_share_clients(sh), SF_SHARE_SLOTS);
    assert_true(sf_share_take(sh, 5000, 60000, 0));
    assert_int_equal(sf_share_clients(sh), SF_SHARE_SLOTS);
    /* charged: over its share once the queue is over half full */
    assert_false(sf_share_take(sh, 5000, 1, 60000));
    sf_share_destroy(sh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_pressure),
        cmocka_unit_test(test_flooder_refused_first),
        cmocka_unit_test(test_reserve_is_room),
        cmocka_unit_test(test_equal_clients_a_little_ahead),
        cmocka_unit_test(test_a_batch_ahead_is_not_a_flooder),
        cmocka_unit_test(test_too_small_to_divide),
        cmocka_unit_test(test_empty_client_and_nobody),
        cmocka_unit_test(test_floor),
        cmocka_unit_test(test_table_full),
        cmocka_unit_test(test_table_of_recent_clients),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
