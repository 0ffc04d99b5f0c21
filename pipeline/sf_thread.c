/* sf_thread.c: the consumers' scheduling (sf_thread.h).
 *
 * DESIGN
 * Per consumer (sf_lumps): whether it may use SCHED_IDLE at all
 * (decided once: it must be able to come back) and whether it is there
 * now, which its producers read and change too (sf_thread.h). Coming
 * back from SCHED_IDLE is a raise of priority for the kernel: allowed with CAP_SYS_NICE in the effective set, or when RLIMIT_NICE
 * allows the target nice (20 - nice <= the limit). Both are read before
 * the thread enters SCHED_IDLE, never tried: a failed try would leave it
 * there. */
#define _GNU_SOURCE             /* gettid, pthread_setname_np */
#include "sf_thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__linux__)
#include <linux/capability.h>
#include <sys/syscall.h>
#endif

static bool has_cap_sys_nice(void)
{
#if defined(__linux__) && defined(SYS_capget)
    struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3, .pid = 0 };
    struct __user_cap_data_struct d[2];

    memset(d, 0, sizeof(d));
    if (syscall(SYS_capget, &h, d) != 0)
        return false;
    return (d[CAP_SYS_NICE / 32].effective & (1u << (CAP_SYS_NICE % 32))) != 0;
#else
    return false;
#endif
}

static bool may_return_to(int nice)
{
    struct rlimit rl;

    if (has_cap_sys_nice())
        return true;
    if (getrlimit(RLIMIT_NICE, &rl) != 0)
        return false;
    return rl.rlim_cur == RLIM_INFINITY || (rlim_t)(20 - nice) <= rl.rlim_cur;
}

/* The nice a consumer runs at when not idle: the calling thread's +5,
 * at most 19. false when the thread's nice cannot be read. */
static bool lumps_nice(int *out)
{
    int nice_now;

    errno = 0;
    nice_now = getpriority(PRIO_PROCESS, (id_t)gettid());
    if (errno != 0)
        return false;
    *out = nice_now + SF_THREAD_LUMPS_NICE > 19 ? 19 : nice_now + SF_THREAD_LUMPS_NICE;
    return true;
}

void sf_thread_lumps_begin(sf_lumps *l, const char *name)
{
    l->tid = gettid();
    if (lumps_nice(&l->nice)) {
        (void)setpriority(PRIO_PROCESS, (id_t)l->tid, l->nice);
        l->idle_allowed = may_return_to(l->nice);
    }
    if (name != NULL)
        pthread_setname_np(pthread_self(), name);
    sf_thread_lumps_urgent(l, false);
}

/* Out of SCHED_IDLE, back to the consumer's nice. */
static bool leave_idle(sf_lumps *l)
{
    struct sched_param sp = { 0 };

    if (sched_setscheduler(l->tid, SCHED_OTHER, &sp) != 0)
        return false;
    l->idle = false;
    (void)setpriority(PRIO_PROCESS, (id_t)l->tid, l->nice);
    return true;
}

void sf_thread_lumps_urgent(sf_lumps *l, bool urgent)
{
    struct sched_param sp = { 0 };

    if (!l->idle_allowed || urgent != l->idle)
        return;                 /* nothing to change */
    if (!urgent) {
        if (sched_setscheduler(0, SCHED_IDLE, &sp) == 0)
            l->idle = true;
        return;
    }
    (void)leave_idle(l);
}

bool sf_thread_lumps_wake(sf_lumps *l)
{
    if (!l->idle || !leave_idle(l))
        return false;
    l->woken = true;
    return true;
}

bool sf_thread_lumps_may_idle(void)
{
    int nice;

    return lumps_nice(&nice) && may_return_to(nice);
}
