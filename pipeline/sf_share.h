/* sf_share.h: a bounded resource (an exporter's sending queue) shared fairly
 * between the clients that fill it, so one flooding client is refused before
 * a moderate one (issue 33).
 *
 * A small table of clients, each holding some of the resource's units. The
 * room is the capacity and what its owner grants past it for now
 * (sf_share_set_reserve). While the resource is at most half its room full
 * nobody is refused for a share; above that, a client that already holds
 * units and would pass its share, max(room / active clients, room /
 * SF_SHARE_FLOOR_DIV), and hold more than twice what the other clients hold
 * on average, is refused when what it adds eats into the room owed to the
 * moderate clients (those holding less than their share: each is owed its
 * share less what it holds): a flooder beside an engine keeps the engine's
 * share free, while clients of equal rates, each near its share, are not
 * refused for being a little ahead while the queue has room.
 * A client holding nothing is never refused for its share (only the
 * capacity bounds it), so every client makes progress. Active: holding
 * units, or seen in the last SF_SHARE_IDLE_MS: a moderate client whose calls
 * have all drained keeps its share between exports (the OTel SDKs' batch
 * processors export every 5 s when not full), so a flooder cannot fill the
 * queue in the gaps and leave it no room.
 *
 * Client 0 is "no client" (the collector's own requests: a scrape, the
 * journal, injected markers): never charged, never refused for a share.
 * A newcomer takes the entry of a client gone idle, else of the one seen
 * least recently that holds nothing; one that finds every entry holding
 * units (SF_SHARE_SLOTS clients with batches queued) is admitted uncharged
 * below half full and refused above it. Thread-safe:
 * one mutex, one pass over the table per call. */
#ifndef SF_SHARE_H
#define SF_SHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SF_SHARE_SLOTS 256
#define SF_SHARE_IDLE_MS 10000
#define SF_SHARE_FLOOR_DIV 64
/* A share of fewer units than this is within the timing noise of clients
 * of equal rates (a batch or two each way): a queue that small, for that
 * many clients, is not divided, only its capacity applies (the seed's 32
 * requests between eight connections: a share of 4). */
#define SF_SHARE_MIN 8

typedef struct sf_share sf_share;

/* A table for a resource of `capacity` units (>= 1); NULL on no memory. */
sf_share *sf_share_create(size_t capacity);
void sf_share_destroy(sf_share *sh);        /* NULL ok */

/* Whether `client` may add `size` units to the resource, which holds `used`
 * units now; on true they are charged to the client (give them back with
 * sf_share_give). False only when the resource is over half full and the
 * client would pass its share into the room owed to moderate clients. */
bool sf_share_take(sf_share *sh, uint64_t client, size_t size, size_t used);
/* Whether `client` is over its share now, the resource holding `used`
 * units: any further take would be refused. Lets a caller refuse before
 * doing the work the take would follow (decoding a request). */
bool sf_share_over(sf_share *sh, uint64_t client, size_t used);
/* The room the resource has past its capacity now (0: none): its owner's
 * sf_queue_set_reserve, so shares are of what the queue can hold now, and
 * a burst the queue holds in a gatherer's reserve is not refused for a
 * share of the capacity alone. */
void sf_share_set_reserve(sf_share *sh, size_t reserve);
/* Charge `size` units without asking (batches handed over by a reload). */
void sf_share_charge(sf_share *sh, uint64_t client, size_t size);
/* `size` units of `client` left the resource (never below zero). */
void sf_share_give(sf_share *sh, uint64_t client, size_t size);

/* Clients active now, and each one's share in units (the gauges). */
size_t sf_share_clients(sf_share *sh);
size_t sf_share_fair(sf_share *sh);

#endif
