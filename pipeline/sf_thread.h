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

#define SF_THREAD_LUMPS_NICE 5

/* Set the calling thread up as a consumer named `name` (at most 15
 * characters: top -H, /proc/<pid>/task/<tid>/comm): nice +5, and
 * SCHED_IDLE when it may leave it again. Best effort: what the kernel
 * refuses leaves the thread as it was (the collector is correct at any
 * priority; only its answers may wait longer). */
void sf_thread_lumps_begin(const char *name);

/* Whether the calling consumer's queue is full enough to make it urgent:
 * at SCHED_IDLE (false) or as a normal thread (true). A call that changes
 * nothing costs no system call. */
void sf_thread_lumps_urgent(bool urgent);

/* Whether a thread at the calling thread's nice could use SCHED_IDLE
 * (and come back from it) as a consumer. */
bool sf_thread_lumps_may_idle(void);

#endif
