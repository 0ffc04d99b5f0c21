/* tools/grpc_unary.h: one blocking unary call with gRPC core (header-only),
 * for the test sender (tools/sf_send.c) and the tests that call a real
 * server (tests/sf_test_grpc.h). */
#ifndef SF_TOOLS_GRPC_UNARY_H
#define SF_TOOLS_GRPC_UNARY_H

#include <string.h>

#include <grpc/grpc.h>
#include <grpc/support/time.h>

/* Call `method` on `ch` with `req` as the message (still the caller's),
 * bounded by `timeout_s`, on the caller's pluck queue `cq`. The call's
 * status goes to *status (GRPC_STATUS_UNKNOWN when the call could not be
 * started), its details (gRPC core's words for a status it made itself: a
 * closed connection, a GOAWAY) to `why` when not NULL, cut to `why_size`;
 * returns what starting the call said. */
static inline grpc_call_error sf_grpc_unary_why(grpc_channel *ch, grpc_completion_queue *cq,
                                                const char *method, grpc_byte_buffer *req,
                                                int timeout_s, grpc_status_code *status,
                                                char *why, size_t why_size)
{
    grpc_slice m = grpc_slice_from_static_string(method), details;
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer *resp = NULL;
    grpc_call_error err;
    grpc_op ops[6];
    grpc_call *c;

    *status = GRPC_STATUS_UNKNOWN;
    c = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, m, NULL,
                                 gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                              gpr_time_from_seconds(timeout_s, GPR_TIMESPAN)),
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
    ops[5].data.recv_status_on_client.status = status;
    ops[5].data.recv_status_on_client.status_details = &details;
    err = grpc_call_start_batch(c, ops, 6, c, NULL);
    if (err == GRPC_CALL_OK) {
        grpc_completion_queue_pluck(cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (why != NULL && why_size > 0) {
            size_t n = GRPC_SLICE_LENGTH(details);

            n = n < why_size - 1 ? n : why_size - 1;
            memcpy(why, GRPC_SLICE_START_PTR(details), n);
            why[n] = '\0';
        }
        grpc_slice_unref(details);
    }
    if (resp != NULL)
        grpc_byte_buffer_destroy(resp);
    grpc_metadata_array_destroy(&init_md);
    grpc_metadata_array_destroy(&trail_md);
    grpc_call_unref(c);
    return err;
}

static inline grpc_call_error sf_grpc_unary(grpc_channel *ch, grpc_completion_queue *cq,
                                            const char *method, grpc_byte_buffer *req,
                                            int timeout_s, grpc_status_code *status)
{
    return sf_grpc_unary_why(ch, cq, method, req, timeout_s, status, NULL, 0);
}

#endif
