// tests/e2e/grpc_protocol.test.js: the OTLP/gRPC receiver (nghttp2) against
// two more independent peers from Debian (grpc_protocol.py): python3-grpcio
// (plain, gzip, a deadline, a client whose keepalive pings break the
// enforcement policy, an oversize message) and python3-h2 (a message flagged
// compressed under identity or no grpc-encoding, two messages in a unary
// call, zstd, no message, a truncated one, one that outlives its
// grpc-timeout): each gets grpc-go's status, each refusal is counted, and
// every span sent is accepted or refused. Server keepalive: a connection
// that never answers the server's pings is closed.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { execFile, execFileSync } = require('node:child_process');

const { Spanfence, freePort, harness, sleep } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort } = require('./lib/config');
const deps = require('./lib/deps');

const SPANS = 8;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);

function config() {
  return collectorConfig({
    receivers: {
      otlp: otlpReceiver({ grpc: envPort('GRPC'), grpcExtra: {
        max_recv_msg_size_mib: 1,
        keepalive: { server_parameters: { time: '1s', timeout: '1s' } },
      } }),
    },
    exporters: { debug: { verbosity: 'basic' } },
    metricsPort: envPort('METRICS'),
    pipelines: { traces: { receivers: ['otlp'], exporters: ['debug'] } },
  });
}

test('gRPC peers get gRPC\'s answers, each refusal counted', async (t) => {
  await harness('grpc_protocol', async (h) => {
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({ dir: h.dir, config: config(), grpcPort, metricsPort,
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort) } }));
    await sf.start();
    const body = path.join(h.dir, 'req.pb');
    execFileSync(deps.sendBin(), ['--write', body, '--spans', String(SPANS)], { stdio: 'pipe' });

    // A connection that sends its preface and never answers a ping.
    let closedAt = null;
    const silent = net.connect({ port: grpcPort, host: '127.0.0.1' }, () => silent.write(Buffer.concat([PREFACE, SETTINGS])));
    silent.on('data', () => {});
    silent.on('error', () => {});
    silent.once('close', () => { closedAt = Date.now(); });
    h.onCleanup(() => silent.destroy());
    const opened = Date.now();

    const out = await new Promise((resolve, reject) => {
      execFile('/usr/bin/python3', [path.join(__dirname, 'grpc_protocol.py'), '--port', String(grpcPort),
        '--body', body, '--max-bytes', String(1 << 20)], { timeout: 90000 }, (err, stdout, stderr) => {
        if (err) reject(new Error(`grpc_protocol.py: ${err.message}\n${stderr}`));
        else resolve(JSON.parse(stdout));
      });
    });
    t.diagnostic(JSON.stringify(out));
    const want = {
      grpcio_plain: 0, grpcio_gzip: 0, grpcio_deadline: 0, grpcio_oversize: 8,
      h2_plain: 0, h2_gzip: 0,
      h2_compressed_identity: 13, h2_compressed_absent: 13,   // INTERNAL, as grpc-go
      h2_two_messages: 12,                                      // UNIMPLEMENTED: cardinality
      h2_zstd: 12, h2_no_message: 3, h2_truncated: 13, h2_deadline: 4,
    };
    for (const [k, code] of Object.entries(want)) assert.equal(out[k][0], code, `${k}: ${JSON.stringify(out[k])}`);
    assert.match(out.h2_compressed_identity[1], /compressed flag set with identity or empty encoding/);
    assert.match(out.grpcio_oversize[1], /larger than max/);
    assert.equal(out.grpcio_keepalive_ended, true, 'a client that pings too often is told (GOAWAY): its connection ends');
    assert.deepEqual(out.grpcio_keepalive, [0, 0], 'a client that pings too often is told (GOAWAY) and its next call works');

    const rcv = { receiver: 'otlp', transport: 'grpc' };
    const accepted = 7 * SPANS;     // the 5 OK calls above + 2 keepalive calls
    const m = await sf.waitMetrics((x) => x.must('otelcol_receiver_accepted_spans', rcv) === accepted,
      `${accepted} spans accepted`, 10000);
    // malformed: compressed x2, two messages, zstd, no message, truncated
    assert.equal(m.must('spanfence_receiver_refused_requests', { ...rcv, reason: 'malformed' }), 6);
    assert.equal(m.must('spanfence_receiver_refused_requests', { ...rcv, reason: 'too_large' }), 1);

    const deadline = Date.now() + 15000;
    while (closedAt === null && Date.now() < deadline) await sleep(100);
    assert.ok(closedAt !== null, 'a connection that never answers keepalive pings is closed');
    t.diagnostic(`silent connection closed after ${closedAt - opened} ms (time 1s + timeout 1s)`);
    await sf.stop();
  });
});
