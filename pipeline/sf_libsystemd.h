/* sf_libsystemd.h: libsystemd, loaded when a config reads the journal.
 *
 * No spanfence program links libsystemd: its journal reader is the
 * journald receiver's alone, and the library with the five it brings
 * (libgcrypt, libgpg-error, liblzma, liblz4, libcap) was 1.1 MiB of idle
 * RSS and about a millisecond of every start (bench/README.md, Start-up).
 * sf_libsystemd.c defines the sd_journal_* functions spanfence calls as
 * forwarders to libsystemd.so.0, opened (dlopen, RTLD_NOW) once by the
 * first call of any of them or of sf_libsystemd_load; without the library
 * they return -ELIBACC. sd_notify, sd_notifyf and sd_watchdog_enabled are
 * implemented there on their own, as sd_notify(3) describes the protocol
 * (a datagram to $NOTIFY_SOCKET; the watchdog from $WATCHDOG_USEC and
 * $WATCHDOG_PID): under systemd the daemon notifies whatever its config,
 * and loading a library for that would undo the point. */
#ifndef SF_LIBSYSTEMD_H
#define SF_LIBSYSTEMD_H

#include "sf_status.h"

/* Loads libsystemd once (thread-safe: sf_dl_api); the journald
 * receiver's create calls it on the main thread. SF_IO when
 * libsystemd.so.0 (Debian: libsystemd0) or one of its functions is
 * missing; the reason in sf_libsystemd_error(). */
sf_status sf_libsystemd_load(void);

/* Why the load failed ("" when it did not, or has not been tried). */
const char *sf_libsystemd_error(void);

#endif
