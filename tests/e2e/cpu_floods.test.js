// tests/e2e/cpu_floods.test.js: floods that cost the collector CPU and
// bring nothing are bounded per connection (issue 33): WINDOW_UPDATE, empty
// DATA, PRIORITY and resets we send (MadeYouReset's window-overflow shape)
// over OTLP/gRPC close the connection with GOAWAY ENHANCE_YOUR_CALM past a
// rate; gzip bombs over gRPC and HTTP are refused past a connection's
// decompression rate and the connection closed when its client goes on.
// Each attack (h2_attack.py, raw frames; the HTTP bombs from here, raw
// sockets) is bounded in connections, rate and time, against a fresh
// collector at a 64 MiB memory limit, with a well-behaved probe beside it
// (20 calls/s of 8 spans, on the attacked transport). Each must cross its
// limit (spanfence_receiver_closed_connections{reason} rose), the probe
// sees >= 95 % OK during it and every call OK from 5 s after, accounting is
// exact (received = accepted + refused; everything accepted at the sink),
// peak RSS stays within limit + 32 MiB, and the collector's CPU over the
// attack (utime + stime from /proc/<pid>/stat over wall time) is printed
// and at most 25 % of one core. SF_CPU_FLOODS (comma-separated) picks the
// attacks of one ctest entry.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const zlib = require('node:zlib');
const { spawn, execFileSync } = require('node:child_process');

const { harness, sleep } = require('./lib/spanfence');
const deps = require('./lib/deps');
const flood = require('./lib/flood');
const peers = require('./lib/peers');
const rawhttp = require('./lib/rawhttp');

const PYTHON = '/usr/bin/python3';   // Debian's, with python3-hpack
const ATTACKER = path.join(__dirname, 'h2_attack.py');
const PROBE_SPANS = 8;
const PROBE_EVERY_MS = 50;
const ATTACK_S = 6;
const AFTER_MS = 5000;

// Each attack: its rate in all (frames a second; bombs: calls a second),
// so its cost is the same on a fast machine and a slow one, and well past
// the per-connection limit it must cross (h2_conn.c: WINDOW_UPDATE 1,000 a
// second, empty DATA and PRIORITY 100, our resets 50 after a burst of 200;
// decompression 8 MiB a second a connection).
const ATTACKS = {
  window_update: { attack: 'window_update_flood', rate: 20000, reason: 'window_update_flood' },
  empty_data: { attack: 'empty_data_flood', rate: 4000, reason: 'empty_data_flood' },
  priority: { attack: 'priority_flood', rate: 4000, reason: 'priority_flood' },
  // two frames a stream: HEADERS, then the WINDOW_UPDATE that overflows it
  server_reset: { attack: 'server_reset_flood', rate: 2000, reason: 'reset_flood' },
  // 4 MiB of zeros in about 4 KB, 10 calls a second a connection
  gzip_bomb_grpc: { attack: 'gzip_bomb', rate: 40, reason: 'decompression', extra: ['--declare', String((4 << 20) - 64)] },
  // 20 MiB of zeros in about 20 KB, 4 requests a second a connection
  gzip_bomb_http: { http: true, rate: 16, reason: 'decompression' },
};
const CONNS = 4;

function runAttacker(spec, port) {
  return new Promise((resolve, reject) => {
    const p = spawn(PYTHON, [ATTACKER, spec.attack, '--port', String(port), '--seconds', String(ATTACK_S),
      '--conns', String(CONNS), '--rate', String(spec.rate), ...(spec.extra || [])],
    { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => { out += d; });
    p.stderr.on('data', (d) => { err += d; });
    const timer = setTimeout(() => p.kill('SIGKILL'), (ATTACK_S + 30) * 1000);
    p.once('error', reject);
    p.once('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) {
        reject(new Error(`h2_attack.py ${spec.attack} exited ${code}: ${err.slice(-2000)}`));
        return;
      }
      resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
}

// HTTP gzip bombs: CONNS keep-alive connections, each sending a bomb when
// the last one is answered and its share of `rate` allows, reconnecting
// when the server closes; until ATTACK_S pass.
async function httpBombs(port, rate) {
  const raw = Buffer.alloc((20 << 20) - 1024);
  const bomb = zlib.gzipSync(raw, { level: 9 });
  const req = Buffer.concat([Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
    'Content-Type: application/x-protobuf\r\nContent-Encoding: gzip\r\n' +
    `Content-Length: ${bomb.length}\r\n\r\n`), bomb]);
  const stats = { frames: 0, connects: 0, closed_by_server: 0, spans: 0, status: {} };
  const start = Date.now();
  const deadline = start + ATTACK_S * 1000;
  const one = async () => {
    while (Date.now() < deadline) {
      stats.connects++;
      await new Promise((resolve) => {
        const sock = net.connect({ port, host: '127.0.0.1' });
        let buf = Buffer.alloc(0);
        let waiting = false;
        const next = async () => {
          // this connection's share of the rate
          while (Date.now() < deadline && stats.frames >= rate * (Date.now() - start) / 1000) await sleep(5);
          if (Date.now() >= deadline) { sock.destroy(); return; }
          stats.frames++;
          waiting = true;
          sock.write(req);
        };
        sock.on('connect', next);
        sock.on('data', (d) => {
          buf = Buffer.concat([buf, d]);
          for (;;) {
            const r = rawhttp.parseResponse(buf);
            if (!r) break;
            const end = buf.indexOf('\r\n\r\n') + 4 + r.body.length;
            buf = buf.subarray(end);
            stats.status[r.status] = (stats.status[r.status] || 0) + 1;
            waiting = false;
            next();
          }
        });
        sock.on('error', () => {});
        sock.on('close', () => {
          if (waiting || Date.now() < deadline) stats.closed_by_server++;
          resolve();
        });
      });
    }
  };
  await Promise.all(Array.from({ length: CONNS }, one));
  return stats;
}

// 20 calls/s of PROBE_SPANS spans until stopped, over gRPC (one grpc-js
// connection) or HTTP (a connection per call); each call's result recorded
// with the phase it started in.
function probe(transport, port, body, phase) {
  const client = transport === 'grpc' ? new peers.RawClient(port) : null;
  const calls = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = Date.now();
      const ph = phase();
      const r = await flood.exportOnce(transport, port, body, client, 5000);
      calls.push({ phase: ph, ok: r.ok, what: r.what });
      const left = PROBE_EVERY_MS - (Date.now() - t0);
      if (left > 0) await sleep(left);
    }
  })();
  return {
    calls,
    async stop() { running = false; await loop; if (client) client.close(); },
  };
}

async function attack(t, name) {
  const spec = ATTACKS[name];
  const transport = spec.http ? 'http' : 'grpc';
  await harness(`cpu_floods_${name}`, async (h) => {
    const { sf, sink, grpcPort, httpPort } = await flood.startFlood(h, { limitMiB: flood.LIMIT_MIB, http: true });
    await sink.start();
    const port = transport === 'grpc' ? grpcPort : httpPort;
    const probeFile = path.join(h.dir, 'probe.pb');
    execFileSync(deps.sendBin(), ['--write', probeFile, '--spans', String(PROBE_SPANS)], { stdio: 'pipe' });
    const body = fs.readFileSync(probeFile);
    const closed = (m) => m.must('spanfence_receiver_closed_connections',
      { receiver: 'otlp', transport, reason: spec.reason });
    const closedBefore = closed(await sf.metrics());

    let phase = 'before';
    const p = probe(transport, port, body, () => phase);
    while (p.calls.length < 5) await sleep(20);
    const s = flood.sampler(sf);
    phase = 'attack';
    const meter = flood.cpuMeter(sf);
    const a = spec.http ? await httpBombs(port, spec.rate) : await runAttacker(spec, port);
    const cpu = meter.stop();
    phase = 'settling';
    await sleep(AFTER_MS);
    phase = 'after';
    const afterFrom = p.calls.length;
    while (p.calls.length < afterFrom + 20) await sleep(20);
    await p.stop();
    const peaks = await s.stop();

    const during = p.calls.filter((x) => x.phase === 'attack');
    const after = p.calls.filter((x) => x.phase === 'after');
    const okDuring = during.filter((x) => x.ok).length;
    const failures = {};
    for (const x of during.concat(after)) if (!x.ok) failures[x.what] = (failures[x.what] || 0) + 1;
    const m0 = await sf.metrics();
    const closedN = closed(m0) - closedBefore;
    t.diagnostic(`${name}: ${flood.cpuText(cpu)}; ${closedN} connections closed (${spec.reason}); attacker ${JSON.stringify(a)}; ` +
      `probe ${okDuring}/${during.length} OK during, ${after.filter((x) => x.ok).length}/${after.length} after; ` +
      `peak RSS ${(peaks.peakRssKiB / 1024).toFixed(1)} MiB` +
      (Object.keys(failures).length ? `; failures ${JSON.stringify(failures)}` : ''));

    assert.ok(a.connects > 0 && a.frames > 0, 'the attacker ran');
    assert.ok(closedN > 0, `the flood crossed its limit: closed_connections{reason="${spec.reason}"} rose`);
    flood.assertCpu(t, cpu);
    assert.ok(during.length > 0, 'probe calls during the attack');
    assert.ok(okDuring >= 0.95 * during.length, `probe during the attack: ${okDuring}/${during.length} OK`);
    assert.deepEqual(after.filter((x) => !x.ok), [], 'every probe call OK from 5 s after the attack');
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bound not checked (it measures the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB <= (flood.LIMIT_MIB + flood.RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB over ${flood.LIMIT_MIB} + ${flood.RSS_SLACK_MIB} MiB`);
    }

    // Accounting: the probe's spans (the bombs carry none) were all
    // accepted or refused, and all accepted reached the sink.
    const sent = p.calls.length * PROBE_SPANS + a.spans;
    const m = await sf.waitMetrics((x) => {
      const e = flood.exporterCounts(x);
      const c = flood.receiverCounts(x, transport);
      return e.queued === 0 && e.sent === c.accepted && c.accepted + c.refusedTotal === sent;
    }, `received ${sent} = accepted + refused, all accepted sent`, 20000);
    const c = flood.receiverCounts(m, transport);
    await flood.assertSinkGot(t, sink, m, c.accepted);
    await sf.stop(20000);
  });
}

const chosen = (process.env.SF_CPU_FLOODS || Object.keys(ATTACKS).join(',')).split(',').filter(Boolean);
for (const name of chosen) {
  if (!ATTACKS[name]) throw new Error(`SF_CPU_FLOODS: unknown attack '${name}'`);
  test(`a CPU flood is bounded: ${name}`, async (t) => { await attack(t, name); });
}
