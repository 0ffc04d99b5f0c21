// tests/e2e/flood_streams.test.js: 2,000 gRPC calls of ~555 KB requests on
// 10 connections, each with as many streams open as the server allows
// (max_concurrent_streams, 16 by default: h2load -m 16), with the downstream
// up and memory_limiter at 64 MiB. Messages are read only once a worker slot
// holds the call, so RSS stays under the limit (net of the idle process) and
// within limit + 32 MiB in all; every call is answered, refusals (if any) are
// retryable and counted, and every accepted span reaches the sink.
// The client asked for 100 streams a connection before: on a busy machine
// h2load sent them before the server's SETTINGS arrived, and nghttp2 refused
// the 84 over the limit with REFUSED_STREAM (RFC 9113 5.1.2), which a gRPC
// client retries but h2load counts as errored: 336, 420 and 840 (4, 5 and 10
// connections' worth) in full suite runs.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { harness, sleep } = require('./lib/spanfence');
const flood = require('./lib/flood');

const REQUESTS = 2000;

test('10 connections of 16 concurrent streams each with the downstream up stay under the limit', async (t) => {
  await harness('flood_streams', async (h) => {
    const { sf, sink, grpcPort } = await flood.startFlood(h, { limitMiB: flood.LIMIT_MIB, http: false });
    await sink.start();
    const file = flood.writePayload(h.dir, { grpcFrame: true });
    await sleep(300);
    const idleKiB = sf.rssKiB();

    const s = flood.sampler(sf);
    const r = await flood.h2load(flood.grpcFlood(grpcPort, file, { n: REQUESTS, c: 10, m: 16 }));
    const peaks = await s.stop();
    t.diagnostic(`10 x 16 streams: ${r.done}/${REQUESTS} answered; idle RSS ${(idleKiB / 1024).toFixed(1)} MiB, ` +
      `peak ${(peaks.peakRssKiB / 1024).toFixed(1)} MiB, peak counted ${(peaks.peakCountedBytes / 1048576).toFixed(1)} MiB`);

    assert.equal(r.done, REQUESTS, `every call answered:\n${r.out.slice(-1500)}`);
    assert.equal(r.errored + r.timeout, 0);
    const m = await sf.waitMetrics((x) => {
      const e = flood.exporterCounts(x);
      return e.queued === 0 && e.sent === flood.receiverCounts(x, 'grpc').accepted;
    }, 'everything accepted was sent', 20000);
    const c = flood.receiverCounts(m, 'grpc');
    assert.equal(c.accepted + c.refusedTotal, REQUESTS * flood.SPANS_PER_REQUEST);
    for (const [reason, n] of Object.entries(c.refused)) {
      if (!flood.RETRYABLE.has(reason)) assert.equal(n, 0, `non-retryable refusals: ${reason}`);
    }
    assert.ok(c.accepted > 0);
    await flood.assertSinkGot(t, sink, m, flood.exporterCounts(m).sent);
    if (flood.sanitized) {
      t.diagnostic('sanitizer build: RSS bounds not checked (they measure the sanitizer)');
    } else {
      assert.ok(peaks.peakRssKiB - idleKiB <= flood.LIMIT_MIB * 1024,
        `RSS grew ${peaks.peakRssKiB - idleKiB} KiB over the idle process: past the ${flood.LIMIT_MIB} MiB limit`);
      assert.ok(peaks.peakRssKiB <= (flood.LIMIT_MIB + flood.RSS_SLACK_MIB) * 1024,
        `peak RSS ${peaks.peakRssKiB} KiB`);
    }
    await sf.stop(20000);
  });
});
