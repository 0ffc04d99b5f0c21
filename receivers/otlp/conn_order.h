/* conn_order.h: connections kept in lists ordered by a time, oldest first,
 * for the two OTLP servers' victim choice (whose slot a newcomer past the
 * caps takes): the gRPC workers' lists by rank (h2_conn.c), the HTTP
 * server's by state (receiver_http.c). Intrusive: a connection embeds a
 * conn_link per list it can be on, and finds itself from it with
 * CONN_ORDER_OF. Times mostly grow, so a connection is placed from the
 * tail, where it almost always goes: a place costs a step or two, the
 * oldest is the head, and a victim is found without a scan of every
 * connection. Not thread-safe: each server holds its own lock or thread. */
#ifndef CONN_ORDER_H
#define CONN_ORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct conn_link {
    struct conn_link *prev, *next;
    int64_t key;                /* the time it is ordered by */
    bool linked;
} conn_link;

typedef struct conn_list {
    conn_link *head, *tail;
} conn_list;

/* The connection of type `type` whose member `member` is the link `l`. */
#define CONN_ORDER_OF(l, type, member) ((type *)(void *)((char *)(l) - offsetof(type, member)))

/* Off its list (nothing when it is on none). */
static inline void conn_order_remove(conn_list *list, conn_link *l)
{
    if (!l->linked)
        return;
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        list->head = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    else
        list->tail = l->prev;
    l->prev = l->next = NULL;
    l->linked = false;
}

/* Onto `list` at `key`, after every link of a key not greater: found from
 * the tail. The link must be on no list. */
static inline void conn_order_insert(conn_list *list, conn_link *l, int64_t key)
{
    conn_link *after = list->tail;

    while (after != NULL && after->key > key)
        after = after->prev;
    l->key = key;
    l->prev = after;
    l->next = after != NULL ? after->next : list->head;
    if (l->next != NULL)
        l->next->prev = l;
    else
        list->tail = l;
    if (after != NULL)
        after->next = l;
    else
        list->head = l;
    l->linked = true;
}

#endif
