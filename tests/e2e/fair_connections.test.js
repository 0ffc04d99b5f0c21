// tests/e2e/fair_connections.test.js: clients that hold connections without
// using them do not stop a well-behaved client from being served, nor hold
// SIGTERM. Over OTLP/HTTP: 200 idle keep-alive connections, 200 slowloris
// clients (a header byte a second) and 200 slow uploads (100 body bytes a
// second), 600 in all, more than the 512 the receiver serves at once; a
// client sending the ~555 KB sample request on a fresh connection is still
// answered 200, five times over. Over OTLP/gRPC: 500 silent connections (no
// HTTP/2 preface) do not stop a call, and are closed by the handshake
// timeout. SIGTERM with every bad client still connected exits 0 in time.
// The HTTP deadlines are set to 2 min here, so only the eviction of a slot
// holder can serve the client within the 30 s it waits, and only a shutdown
// that does not wait for the bad clients ends within its 30 s: the margins
// do not depend on the machine's speed. (Without the eviction the client
// waits in the listen backlog until a deadline frees a slot.)
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');

const { harness, waitUntil } = require('./lib/spanfence');
const flood = require('./lib/flood');
const peers = require('./lib/peers');

const EACH = 200;
const SILENT_GRPC = 500;

// Opens a connection and runs `behave(sock)` once connected; tracks closes.
function open(port, behave, tracker) {
  const sock = net.connect({ port, host: '127.0.0.1' });
  tracker.socks.push(sock);
  sock.on('error', () => {});
  sock.on('data', () => {});
  sock.once('close', () => { tracker.closed++; });
  sock.once('data', () => { tracker.answered = (tracker.answered || 0) + 1; });
  sock.once('connect', () => { tracker.connected = (tracker.connected || 0) + 1; behave(sock); });
  return sock;
}

function trickle(sock, bytes, everyMs, tracker) {
  let i = 0;
  const timer = setInterval(() => {
    if (sock.destroyed || i >= bytes.length) {
      clearInterval(timer);
      return;
    }
    sock.write(bytes.subarray(i, i + 1));
    i++;
  }, everyMs);
  tracker.timers.push(timer);
}

test('idle, slowloris and slow-upload clients do not starve a well-behaved one', async (t) => {
  await harness('fair_connections', async (h) => {
    const { sf, sink, grpcPort, httpPort } = await flood.startFlood(h, { limitMiB: 256,
      httpExtra: { read_header_timeout: '2m', read_timeout: '2m', idle_timeout: '2m' } });
    await sink.start();
    const file = flood.writePayload(h.dir);
    const body = fs.readFileSync(file);
    const tracker = { socks: [], timers: [], closed: 0 };
    h.onCleanup(() => {
      for (const x of tracker.timers) clearInterval(x);
      for (const s of tracker.socks) s.destroy();
    });

    // Idle keep-alive: one answered request (an empty export: 200, kept
    // open), then nothing.
    for (let i = 0; i < EACH; i++) {
      open(httpPort, (s) => s.write('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
        'Content-Type: application/x-protobuf\r\nContent-Length: 0\r\n\r\n'), tracker);
    }
    // Slowloris: headers a byte a second, never finished.
    const head = Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\nX-Slow: ' + 'a'.repeat(200));
    for (let i = 0; i < EACH; i++) {
      open(httpPort, (s) => trickle(s, head, 1000, tracker), tracker);
    }
    // Slow upload: complete headers, then the body 100 bytes a second.
    for (let i = 0; i < EACH; i++) {
      open(httpPort, (s) => {
        s.write('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n' +
          `Content-Length: ${body.length}\r\n\r\n`);
        const timer = setInterval(() => { if (!s.destroyed) s.write(body.subarray(0, 100)); }, 1000);
        tracker.timers.push(timer);
      }, tracker);
    }
    // Silent gRPC connections: TCP only, no preface.
    const silent = { socks: [], timers: [], closed: 0 };
    h.onCleanup(() => { for (const s of silent.socks) s.destroy(); });
    for (let i = 0; i < SILENT_GRPC; i++) open(grpcPort, () => {}, silent);
    // Every bad connection established (and the idle ones answered) before
    // the good client comes, however long that takes here.
    await waitUntil(() => tracker.connected === 3 * EACH && silent.connected === SILENT_GRPC
      && tracker.answered >= EACH, 'the bad connections established');

    // The well-behaved client, on fresh connections.
    let goodSpans = 0;
    for (let i = 0; i < 5; i++) {
      // 30 s: well inside read_header_timeout (2 min), so it is the
      // eviction of a slot holder that serves this client, not a deadline.
      const x = await flood.exportOnce('http', httpPort, body, null, 30000);
      goodSpans += flood.SPANS_PER_REQUEST;
      assert.ok(x.ok, `well-behaved HTTP export ${i} among ${3 * EACH} bad connections: ${x.what}`);
    }
    const client = new peers.RawClient(grpcPort);
    h.onCleanup(() => client.close());
    const g = await flood.exportOnce('grpc', grpcPort, body, client);
    assert.ok(g.ok, `gRPC export among ${SILENT_GRPC} silent connections: ${g.what}`);
    t.diagnostic(`served among bad clients; ${tracker.closed} of ${3 * EACH} bad HTTP connections closed by the server so far`);

    // The handshake timeout (10 s) closes the silent gRPC connections.
    await waitUntil(() => silent.closed === SILENT_GRPC,
      'silent gRPC connections closed by the handshake timeout', 60000);

    const m = await sf.waitMetrics((x) => flood.exporterCounts(x).sent === goodSpans + flood.SPANS_PER_REQUEST,
      'the good exports sent', 10000);
    const c = flood.receiverCounts(m, 'http');
    assert.equal(c.accepted, goodSpans);
    assert.equal(c.refusedTotal, 0, 'the bad clients sent no complete request: nothing refused');

    // SIGTERM with the bad HTTP clients still connected: a clean exit, in time.
    const stillOpen = tracker.socks.length - tracker.closed;
    const t0 = Date.now();
    await sf.stop(30000);
    t.diagnostic(`SIGTERM with ${stillOpen} bad HTTP connections open: exited 0 after ${Date.now() - t0} ms`);
  });
});
