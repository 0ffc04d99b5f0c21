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
    grpc_slice m = grpc_slice_from_static_string(method);
    grpc_slice body = grpc_slice_from_copied_buffer(data, len), details;
    grpc_byte_buffer *req = grpc_raw_byte_buffer_create(&body, 1), *resp = NULL;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_op ops[6];
    grpc_call *c;

    c = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                 gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                              gpr_time_from_seconds(20, GPR_TIMESPAN)),
                                 NULL);
    grpc_metadata_array_init(&init_md);
    grpc_metadata_array_init(&trail_md);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = req;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &init_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &resp;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trail_md;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    assert_int_equal(grpc_call_start_batch(c, ops, 6, c, NULL), GRPC_CALL_OK);
    grpc_completion_queue_pluck(cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_slice_unref(details);
    grpc_slice_unref(body);
    if (resp != NULL)
        grpc_byte_buffer_destroy(resp);
    grpc_byte_buffer_destroy(req);
    grpc_metadata_array_destroy(&init_md);
    grpc_metadata_array_destroy(&trail_md);
    grpc_call_unref(c);
    return status;
}

#endif
