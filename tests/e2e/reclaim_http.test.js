// tests/e2e/reclaim_http.test.js: crawling uploads are the first reclaimed
// (issue 33). 40 OTLP/HTTP uploads declaring Content-Length 20 MiB send 2 MiB
// at once, then a byte every 9 s, each reconnecting at once when closed: 80
// MiB of bodies against a 64 MiB memory limit, whose bodies' budget is a
// share of it. Bodies reserve what arrived (rounded up), not twice that; the
// uploads holding the most bytes with the least recent progress are answered
// 503 and closed (spanfence_receiver_reclaimed_*), so a well-behaved client
// posting 8-span requests at 10/s beside them sees >= 95 % of them OK during
// the attack and every one after it; peak RSS stays within the limit + 32 MiB
// and received = accepted + refused. read_timeout and idle_timeout are 2
// min, far past the attack, so no deadline frees a slot or a buffer here.
// Twice: with the bodies' budget the bound, and with memory the bound.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { execFileSync } = require('node:child_process');

const { harness, waitUntil } = require('./lib/spanfence');
const deps = require('./lib/deps');
const flood = require('./lib/flood');
const fair = require('./lib/fair');

const CONNS = 40;
const DECLARE = 20 << 20;
const BURST = 2 << 20;
const CRAWL_MS = 9000;
const PROBE_SPANS = 8;
const PROBE_EVERY_MS = 100;
const PROBE_DURING = 50;
const PROBE_AFTER = 20;

// CONNS uploads that burst then crawl, reconnecting when closed, until stop().
function crawlers(port) {
  const st = { connects: 0, closed: 0, answered503: 0, bytes: 0 };
  const socks = new Set();
  let running = true;
  const head = Buffer.from('POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\n' +
    `Content-Type: application/x-protobuf\r\nContent-Length: ${DECLARE}\r\n\r\n`);
  const burst = Buffer.alloc(BURST, 0x0a);
  const open = () => {
    if (!running) return;
    const sock = net.connect({ port, host: '127.0.0.1' });
    socks.add(sock);
    let timer = null;
    sock.on('error', () => {});
    sock.once('connect', () => {
      st.connects++;
      sock.write(head);
      sock.write(burst);
      st.bytes += burst.length;
      timer = setInterval(() => { sock.write(Buffer.from([0x0a])); st.bytes++; }, CRAWL_MS);
    });
    sock.on('data', (d) => { if (d.toString('latin1').startsWith('HTTP/1.1 503')) st.answered503++; });
    sock.once('close', () => {
      clearInterval(timer);
      socks.delete(sock);
      st.closed++;
      setImmediate(open);
    });
  };
  for (let i = 0; i < CONNS; i++) open();
  return {
    st,
    stop() {
      running = false;
      for (const s of socks) s.destroy();
    },
  };
}

// `maxBody`: max_request_body_size. At 20 MiB the bodies' budget (a quarter
// of the hard limit, at least one body) fills before memory is short
// (reason buffer_budget); at 64 MiB it is one body, past the soft limit, so
// memory runs short first (memory_short).
async function crawl(t, name, maxBody, reason) {
  await harness(name, async (h) => {
    const limit = flood.LIMIT_MIB << 20;
    const { sf, sink, httpPort } = await flood.startFlood(h, { limitMiB: flood.LIMIT_MIB, grpc: true,
      httpExtra: { read_header_timeout: '2m', read_timeout: '2m', idle_timeout: '2m',
        max_request_body_size: maxBody } });
    await sink.start();
    const probeFile = path.join(h.dir, 'probe.pb');
    execFileSync(deps.sendBin(), ['--write', probeFile, '--spans', String(PROBE_SPANS)], { stdio: 'pipe' });
    const body = fs.readFileSync(probeFile);
    assert.ok(CONNS * BURST > limit, 'the uploads hold more than the limit');

    let phase = 'before';
    const p = fair.probe('http', httpPort, body, PROBE_EVERY_MS, () => phase);
    h.onCleanup(() => p.stop());
    await waitUntil(() => p.calls.length >= 5, 'the probe started');
    const s = flood.sampler(sf);
    phase = 'attack';
    const meter = flood.cpuMeter(sf);
    const a = crawlers(httpPort);
    h.onCleanup(() => a.stop());
    // What the uploads held past the limit was reclaimed.
    const past = CONNS * BURST - limit;
    const byReason = (x) => x.get('spanfence_receiver_reclaimed_bytes', { transport: 'http', reason }) || 0;
    const m = await sf.waitMetrics((x) => byReason(x) >= past,
      `${past} bytes reclaimed from crawling uploads (${reason})`, 90000);
    await waitUntil(() => fair.tally(p.calls, 'attack').n >= PROBE_DURING, 'probe calls during the attack', 60000);
    a.stop();
    const cpu = meter.stop();
    phase = 'after';
    const afterFrom = p.calls.length;
    await waitUntil(() => p.calls.length >= afterFrom + PROBE_AFTER, 'probe calls after the attack', 60000);
    await p.stop();
    const peaks = await s.stop();

    const during = fair.tally(p.calls, 'attack');
    const after = fair.tally(p.calls, 'after');
    const r = fair.reclaimed(m, 'http');
    t.diagnostic(`${flood.cpuText(cpu)}; ` +
      `crawlers ${JSON.stringify(a.st)}; reclaimed ${r.requests} uploads, ` +
      `${(r.bytes / 1048576).toFixed(0)} MiB (${JSON.stringify(['memory_short', 'buffer_budget'].map((why) =>
        m.get('spanfence_receiver_reclaimed_requests', { transport: 'http', reason: why })))}); probe ` +
      `${during.ok}/${during.n} OK during, ${after.ok}/${after.n} after; peak RSS ` +
      `${(peaks.peakRssKiB / 1024).toFixed(1)} MiB, counted ${(peaks.peakCountedBytes / 1048576).toFixed(1)} MiB` +
      (Object.keys(during.failures).length ? `; failures ${JSON.stringify(during.failures)}` : ''));

    assert.ok(a.st.bytes > limit, `the uploads sent ${a.st.bytes} bytes, more than the limit`);
    assert.ok(a.st.answered503 > 0, 'a reclaimed upload is answered 503 before it is closed');
    flood.assertCpu(t, cpu);
    assert.ok(during.ok >= 0.95 * during.n, `probe during the attack: ${during.ok}/${during.n} OK`);
    assert.equal(after.ok, after.n, `every probe request after the attack OK: ${JSON.stringify(after.failures)}`);
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bound not checked (it measures the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB <= (flood.LIMIT_MIB + flood.RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB over ${flood.LIMIT_MIB} + ${flood.RSS_SLACK_MIB} MiB`);
    }
    // Accounting: every probe span accepted or refused, all accepted sent
    // (the uploads, never complete, carry no span the counter could find:
    // their bodies are newlines).
    const sent = p.calls.length * PROBE_SPANS;
    const fin = await sf.waitMetrics((x) => {
      const e = flood.exporterCounts(x);
      const c = flood.receiverCounts(x, 'http');
      return e.queued === 0 && e.sent === c.accepted && c.accepted + c.refusedTotal === sent;
    }, `received ${sent} = accepted + refused, all accepted sent`, 20000);
    await flood.assertSinkGot(t, sink, fin, flood.receiverCounts(fin, 'http').accepted);
    await sf.stop(20000);
  });
}

test('crawling HTTP uploads pay for the buffers they hold when the bodies\' budget is full', async (t) => {
  await crawl(t, 'reclaim_http_budget', '20MiB', 'buffer_budget');
});

test('crawling HTTP uploads pay for the memory they hold when memory is short', async (t) => {
  await crawl(t, 'reclaim_http_memory', '64MiB', 'memory_short');
});
