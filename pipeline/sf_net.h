/* sf_net.h: endpoint strings ("127.0.0.1:4318", "[::1]:8888", "localhost:0")
 * to socket addresses, for the servers spanfence binds. */
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

/* A small HTTP endpoint of the collector's own (/metrics, health_check):
 * libmicrohttpd on its own polling thread, at most 16 connections idle at
 * most 10 s, answering with `handler` and `cls`. `what` names it in the
 * log. SF_INVALID when `endpoint` does not resolve, SF_IO when it cannot
 * listen. */
sf_status sf_net_http_listen(const char *what, const char *endpoint,
                             MHD_AccessHandlerCallback handler, void *cls,
                             struct MHD_Daemon **out);
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
