/* tests/sf_test_grpc.h: a gRPC core client for tests that call a real
 * server: a channel to a loopback port and one unary call with raw message
 * bytes (header-only; include it after <cmocka.h>). */
#ifndef SF_TEST_GRPC_H
#define SF_TEST_GRPC_H

#include <string.h>

#include <stdio.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "tools/grpc_unary.h"

typedef struct sf_test_grpc_client {
    grpc_channel *ch;
    grpc_completion_queue *cq;      /* pluck */
} sf_test_grpc_client;

/* An insecure channel to 127.0.0.1:port. */
static inline void sf_test_grpc_connect(sf_test_grpc_client *c, int port)
{
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    char target[64];

    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    c->ch = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    c->cq = grpc_completion_queue_create_for_pluck(NULL);
}

static inline void sf_test_grpc_close(sf_test_grpc_client *c)
{
    grpc_channel_destroy(c->ch);
    grpc_completion_queue_shutdown(c->cq);
    while (grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type
           != GRPC_QUEUE_SHUTDOWN)
        ;
    grpc_completion_queue_destroy(c->cq);
}

/* Call `method` on `ch` with `data` as the message, bounded by 20 s, and
 * return the call's status; `cq` is a pluck queue of the caller's. */
static inline grpc_status_code sf_test_grpc_call(grpc_channel *ch, grpc_completion_queue *cq,
                                                 const char *method, const void *data,
                                                 size_t len)
{
    grpc_slice body = grpc_slice_from_copied_buffer(data, len);
    grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&body, 1);
    grpc_status_code status;

    assert_int_equal(sf_grpc_unary(ch, cq, method, req, 20, &status), GRPC_CALL_OK);
    grpc_slice_unref(body);
    grpc_byte_buffer_destroy(req);
    return status;
}

#endif
