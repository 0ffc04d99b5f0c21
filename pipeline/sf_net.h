/* sf_net.h: endpoint strings ("127.0.0.1:4318", "[::1]:8888", "localhost:0")
 * to socket addresses, for the servers spanfence binds; the HTTP
 * endpoints' sockets and the start of their daemons. */
#ifndef SF_NET_H
#define SF_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "sf_status.h"

/* Split "host:port" (IPv6 in brackets). SF_INVALID when malformed. */
sf_status sf_net_split(const char *endpoint, char *host, size_t host_size, uint16_t *port);
/* What is wrong with `endpoint` as a "host:port" to listen on, for a
 * config error ("port '99999' is out of range 0-65535"), or NULL when
 * nothing is: the form sf_net_split accepts, the port all digits. */
const char *sf_net_endpoint_problem(const char *endpoint, char *buf, size_t size);
/* Resolve to a numeric socket address (getaddrinfo, AI_NUMERICSERV).
 * SF_INVALID when malformed or unresolvable. */
sf_status sf_net_resolve(const char *endpoint, struct sockaddr_storage *addr, socklen_t *len);

/* Why a TCP listener cannot bind `endpoint` now ("address already in use",
 * "cannot assign requested address", "does not resolve"), in buf, or NULL
 * when a bind works: asked before a server library that reports the
 * failure at length (gRPC core's status blob) or not at all. */
const char *sf_net_bind_problem(const char *endpoint, char *buf, size_t size);

/* strerror(err) in lowercase, as the collector's error lines are
 * ("address already in use"), into buf; returns buf. */
const char *sf_net_errno_text(int err, char *buf, size_t size);
/* `url` with its user:password@ (or user@) replaced by "[REDACTED]@", in
 * buf (cut to size), for output that must not carry a credential; `url`
 * itself when it has none. */
const char *sf_net_url_redacted(const char *url, char *buf, size_t size);

/* The client a receiver's peer counts as, for the sending queues' fair
 * shares (sf_share.h, sf_request.client): its address, so a host is one
 * client however many connections it opens; but on loopback, where every
 * local process (the engine, a flooder, a sidecar) has the same address,
 * its address and port: one client per connection. Never 0 for an IPv4 or
 * IPv6 peer; 0 (nobody in particular) for NULL or another family. */
uint64_t sf_net_client_key(const struct sockaddr *peer);
/* The same for the peer of connected socket `fd` (getpeername). */
uint64_t sf_net_client_of_fd(int fd);

/* A TCP socket bound to `endpoint` and listening (SOMAXCONN, non-blocking,
 * SO_REUSEADDR, IPv6 only for an IPv6 address), in *fd: the port accepts
 * connections from now on, into the backlog until a daemon takes it.
 * SF_INVALID when `endpoint` does not resolve, SF_IO when it cannot listen,
 * with why ("address already in use") in `why`. */
sf_status sf_net_http_bind(const char *endpoint, int *fd, char *why, size_t why_size);

/* The HTTP endpoints' daemons start after READY (sf_libmicrohttpd.h says
 * why). The collector's main thread calls sf_net_http_defer before
 * starting the service: from then on a start below binds its socket at
 * once (the port accepts) and queues the daemon's start, which
 * sf_net_http_run_deferred runs after READY (loading libmicrohttpd first),
 * ending the deferral: later starts (a reload's) run at once, as every
 * start does in a program that never defers (the tests). Start, stop and
 * run happen on the collector's main thread, as the service's do. */
void sf_net_http_defer(void);
/* Runs the queued starts in order; SF_IO when libmicrohttpd cannot be
 * loaded or a daemon cannot start (said in the log): the collector then
 * stops. A start not run (after a failure) has its socket closed. */
sf_status sf_net_http_run_deferred(void);

/* A daemon's start on listening socket `fd`: on SF_OK the daemon owns
 * `fd` (MHD_OPTION_LISTEN_SOCKET: MHD_stop_daemon closes it); on error the
 * start has closed it. */
typedef sf_status (*sf_net_http_start_fn)(void *arg, int fd);
/* Runs start(arg, fd) now, or queues it while deferring (SF_OK); `daemon`
 * (set NULL now, by `start` later) is the entry's key for
 * sf_net_http_cancel. `what` names the endpoint in a load error. */
sf_status sf_net_http_start_on(struct MHD_Daemon **daemon, const char *what,
                               sf_net_http_start_fn start, void *arg, int fd);
/* Drops the queued start keyed `daemon` and closes its socket: true when
 * there was one (its daemon never started), false otherwise. */
bool sf_net_http_cancel(struct MHD_Daemon **daemon);

/* A small HTTP endpoint of the collector's own (/metrics, health_check):
 * libmicrohttpd on its own polling thread, at most 16 connections idle at
 * most 10 s, answering with `handler` and `cls`, on a socket bound now;
 * *out is set when the daemon starts (now, or after READY). `what` names
 * it in the log. SF_INVALID when `endpoint` does not resolve, SF_IO when
 * it cannot listen. */
sf_status sf_net_http_listen(const char *what, const char *endpoint,
                             MHD_AccessHandlerCallback handler, void *cls,
                             struct MHD_Daemon **out);
/* Stops what sf_net_http_listen or sf_net_http_start_on started (joins
 * the daemon's threads: no request after this), or drops its queued
 * start; *daemon is NULL after. */
void sf_net_http_stop(struct MHD_Daemon **daemon);
/* Answer `code` with Content-Type `type` and `body` (copied). MHD_NO when
 * the response cannot be made. */
enum MHD_Result sf_net_http_respond(struct MHD_Connection *conn, unsigned code, const char *type,
                                    const char *body, size_t len);
/* The start of a GET endpoint's handler (the monitoring server's and
 * health_check's): false while the request is still coming (its headers,
 * then any body, which is read and ignored) or when the method is neither
 * GET nor HEAD (405 is queued), with *ret what the handler returns; true
 * when the handler answers now. `cls` marks the request as begun. */
bool sf_net_http_get_begin(struct MHD_Connection *conn, const char *method, size_t *upload_size,
                           void **req_cls, void *cls, enum MHD_Result *ret);

#endif
