#!/usr/bin/python3
# tests/e2e/grpc_protocol.py: the OTLP/gRPC receiver's answers to what a gRPC
# peer may send, checked with two independent clients from Debian:
# python3-grpcio (gRPC core's Python binding: gzip, deadlines, keepalive
# pings) and python3-h2 (hand-made calls gRPC libraries refuse to make: a
# message flagged compressed under identity, two messages in a unary call,
# a message that never ends under grpc-timeout). Prints one JSON object:
# {"name": [grpc-status, grpc-message], ...}; grpc_protocol.test.js asserts.
import argparse
import gzip
import json
import socket
import struct
import threading
import time

import grpc
import h2.config
import h2.connection
import h2.events

EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export'


def frame(body, compressed=False):
    return bytes([1 if compressed else 0]) + struct.pack('>I', len(body)) + body


def raw_call(port, messages, headers=(), end=True, wait_s=10):
    """One call over a fresh HTTP/2 connection: send `messages` (bytes, each
    already gRPC-framed) as DATA, then read to the status."""
    sock = socket.create_connection(('127.0.0.1', port))
    sock.settimeout(wait_s)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [(':method', 'POST'), (':scheme', 'http'), (':path', EXPORT),
                            (':authority', f'127.0.0.1:{port}'),
                            ('content-type', 'application/grpc'), ('te', 'trailers')]
                      + list(headers))
    for i, m in enumerate(messages):
        conn.send_data(sid, m, end_stream=end and i == len(messages) - 1)
    if not messages and end:
        conn.end_stream(sid)
    sock.sendall(conn.data_to_send())
    status = {}
    deadline = time.monotonic() + wait_s
    try:
        while time.monotonic() < deadline:
            data = sock.recv(65536)
            if not data:
                break
            for ev in conn.receive_data(data):
                if isinstance(ev, (h2.events.ResponseReceived, h2.events.TrailersReceived)):
                    for k, v in ev.headers:
                        k = k.decode() if isinstance(k, bytes) else k
                        v = v.decode() if isinstance(v, bytes) else v
                        if k in ('grpc-status', 'grpc-message'):
                            status[k] = v
                if isinstance(ev, h2.events.DataReceived):
                    conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
                if isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    deadline = 0
            sock.sendall(conn.data_to_send())
    except socket.timeout:
        pass
    sock.close()
    return [int(status['grpc-status']) if 'grpc-status' in status else None,
            status.get('grpc-message', '')]


def grpcio_call(port, body, compression=None, timeout=10, options=()):
    ch = grpc.insecure_channel(f'127.0.0.1:{port}', options=list(options))
    f = ch.unary_unary(EXPORT, request_serializer=lambda x: x, response_deserializer=lambda x: x)
    try:
        f(body, timeout=timeout, compression=compression)
        r = [0, '']
    except grpc.RpcError as e:
        r = [e.code().value[0], e.details() or '']
    ch.close()
    return r


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--body', required=True, help='an ExportTraceServiceRequest (protobuf)')
    p.add_argument('--max-bytes', type=int, required=True, help='max_recv_msg_size_mib in bytes')
    a = p.parse_args()
    body = open(a.body, 'rb').read()
    out = {}
    # python3-grpcio: plain, gzip, a deadline, keepalive pings every second
    # on a call that lasts, oversize.
    out['grpcio_plain'] = grpcio_call(a.port, body)
    out['grpcio_gzip'] = grpcio_call(a.port, body, compression=grpc.Compression.Gzip)
    out['grpcio_deadline'] = grpcio_call(a.port, body, timeout=5)
    # A client pinging every second with no call open, against the default
    # enforcement_policy (min_time 5m, no pings without calls): GOAWAY
    # too_many_pings after three, as gRPC servers do; the client backs off
    # its pings and its next call, made once the first connection has
    # ended, succeeds. grpcio reads an idle connection only when something
    # polls it (else its backup poller, every 5 s): a connectivity watcher
    # keeps it polled, so the GOAWAY is read when it comes (and the server's
    # keepalive pings answered) instead of a next call racing the poller
    # onto a closed socket (UNAVAILABLE, 2 runs in 7 of a repeat run). A
    # failed call is recorded as [status, message, seconds since the channel
    # was made], for the log.
    t0 = time.monotonic()
    ch = grpc.insecure_channel(f'127.0.0.1:{a.port}', options=[
        ('grpc.keepalive_time_ms', 1000), ('grpc.keepalive_permit_without_calls', 1),
        ('grpc.http2.max_pings_without_data', 0)])
    ready, ended = threading.Event(), threading.Event()

    def watch(state):
        if state == grpc.ChannelConnectivity.READY:
            ready.set()
        elif ready.is_set():
            ended.set()
    ch.subscribe(watch)
    f = ch.unary_unary(EXPORT, request_serializer=lambda x: x, response_deserializer=lambda x: x)
    r = []
    for i in range(2):
        try:
            # the next call may wait for the reconnect (wait_for_ready)
            # rather than fail fast while the channel is between connections
            f(body, timeout=10, wait_for_ready=i > 0)
            r.append(0)
        except grpc.RpcError as e:
            r.append([e.code().value[0], e.details(), round(time.monotonic() - t0, 3)])
        if i == 0:
            # 60 s: a stuck run's bound; the GOAWAY comes after three pings.
            out['grpcio_keepalive_ended'] = ended.wait(60)
    ch.unsubscribe(watch)
    ch.close()
    out['grpcio_keepalive'] = r
    out['grpcio_oversize'] = grpcio_call(a.port, b'\x0a' + b'\xff' * (a.max_bytes + 10))
    # python3-h2: what gRPC libraries will not send.
    out['h2_plain'] = raw_call(a.port, [frame(body)])
    out['h2_gzip'] = raw_call(a.port, [frame(gzip.compress(body), True)], [('grpc-encoding', 'gzip')])
    out['h2_compressed_identity'] = raw_call(a.port, [frame(body, True)], [('grpc-encoding', 'identity')])
    out['h2_compressed_absent'] = raw_call(a.port, [frame(body, True)])
    out['h2_two_messages'] = raw_call(a.port, [frame(body), frame(body)])
    out['h2_zstd'] = raw_call(a.port, [frame(body, True)], [('grpc-encoding', 'zstd')])
    out['h2_no_message'] = raw_call(a.port, [])
    out['h2_truncated'] = raw_call(a.port, [frame(body)[:-10]])
    out['h2_deadline'] = raw_call(a.port, [frame(body)[:-10]], [('grpc-timeout', '300m')], end=False)
    print(json.dumps(out))


if __name__ == '__main__':
    main()
