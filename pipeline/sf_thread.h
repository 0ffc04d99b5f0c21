/* sf_thread.h: what the scheduler is told about the exporters' consumers.
 * Their work comes in lumps nobody waits on (a merged request of thousands
 * of spans compressed in one go); the receivers' in small pieces the
 * engine's export call is blocked on. On a collector short of CPU the
 * receivers must get the CPU as soon as they wake; the lumps finish in the
 * gaps, and the bounded queue between them absorbs the delay.
 *
 * A consumer runs at SCHED_IDLE while its queue has room, so a receiver
 * (or the engine) that wakes preempts it at once. Nice values do not do
 * that on Linux 6.6+ (EEVDF): a waking thread waits for the running one's
 * protected slice whatever their nice, and on the benchmark's VM p99
 * answer latency did not move between consumers at nice 5 and 19.
 * SCHED_IDLE alone would starve exports beside an engine that keeps every
 * core busy (its weight is 3 against a nice-0 thread's 1024), and every
 * wake-up of a receiver preempting a consumer costs a context switch, so
 * a consumer that sees a backlog (a sixteenth of its queue) runs as a
 * normal thread at nice +5 (a third of a nice-0 thread's weight) until
 * the queue is below a sixty-fourth: the backlog is worked off before
 * calls are refused.
 * Leaving SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE that allows
 * nice +5 (the systemd unit sets LimitNICE=); without either a consumer
 * never enters SCHED_IDLE and stays at nice +5. */
#ifndef SF_THREAD_H
#define SF_THREAD_H

#include <stdbool.h>
#include <sys/types.h>

#define SF_THREAD_LUMPS_NICE 5

/* One consumer's place with the scheduler, shared with the threads that
 * fill its queue. A consumer at SCHED_IDLE beside receivers that keep its
 * CPU busy does not run, so it cannot see the backlog and leave SCHED_IDLE
 * itself: pinned to one CPU under a closed-loop load of 512-span calls, a
 * 64-request queue filled and refused up to 60 % of a round's calls (238
 * of 400) after decoding them, against 5 of 1,200 with the consumers at
 * nice +5 alone. So a
 * producer that sees the backlog takes it out (sf_thread_lumps_wake). The
 * caller serialises every call on one sf_lumps (sf_sender: its `mu`). */
typedef struct sf_lumps {
    pid_t tid;              /* the consumer's thread; 0 before sf_thread_lumps_begin */
    int nice;               /* the nice it runs at when not idle */
    bool idle_allowed;      /* may enter SCHED_IDLE and leave it */
    bool idle;              /* at SCHED_IDLE now */
    bool woken;             /* a producer took it out since the consumer last looked */
} sf_lumps;

/* Set the calling thread up as the consumer of `l` (zeroed), named `name`
 * (at most 15 characters: top -H, /proc/<pid>/task/<tid>/comm): nice +5,
 * and SCHED_IDLE when it may leave it again. Best effort: what the kernel
 * refuses leaves the thread as it was (the collector is correct at any
 * priority; only its answers may wait longer). */
void sf_thread_lumps_begin(sf_lumps *l, const char *name);

/* By the consumer of `l`: whether its queue is full enough to make it
 * urgent: at SCHED_IDLE (false) or as a normal thread (true). A call that
 * changes nothing costs no system call. */
void sf_thread_lumps_urgent(sf_lumps *l, bool urgent);

/* By any thread: the consumer of `l` leaves SCHED_IDLE now (and `woken`
 * is set for it to see); true when it was there. */
bool sf_thread_lumps_wake(sf_lumps *l);

/* Whether a thread at the calling thread's nice could use SCHED_IDLE
 * (and come back from it) as a consumer. */
bool sf_thread_lumps_may_idle(void);

#endif
