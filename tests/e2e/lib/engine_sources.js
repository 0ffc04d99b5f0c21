// tests/e2e/lib/engine_sources.js: the stand-in SGLang engine's three
// sources, as the real code makes them, for the trace_control tests:
//  - its spans: the real OpenTelemetry JS SDK with SGLang's
//    BatchSpanProcessor settings (sglang/srt/tracing:
//    schedule_delay_millis=500, max_export_batch_size=64, the SDK's
//    default queue of 2048), exported over OTLP/gRPC;
//  - its log: lines appended to a journal file by the real journal code
//    (systemd-journal-remote, from the journal export format), with
//    SGLang's drop messages;
//  - its latency: SGLang's TTFT and ITL histograms served by Debian's
//    python3-prometheus-client (tests/e2e/latency_exposer.py).
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const readline = require('node:readline');
const { spawn, spawnSync } = require('node:child_process');

const deps = require('./deps');
const { RecordingExporter } = require('./peers');

const JOURNAL_REMOTE = '/lib/systemd/systemd-journal-remote';
const BOOT = '0123456789abcdef0123456789abcdef';
// the OpenTelemetry Python SDK's BatchSpanProcessor, its queue full
const SDK_QUEUE_FULL = 'Queue is full, likely spans will be dropped.';
// SGLANG_TRACE_ASYNC=1 (observability/trace_async.py)
const zmqFull = (n, rid) => `ZMQ send buffer full, dropping ${n} trace ops for ${rid}`;

let seq = 0;
// Appends `lines` ({unit = 'sglang.service', message}) to the journal
// file `file`; returns how many.
function journal(file, lines) {
  const entries = lines.map(({ unit = 'sglang.service', message }) => {
    const n = seq++;
    const f = (k, v) => `${k}=${v}\n`;
    return f('__REALTIME_TIMESTAMP', 1796000000000000 + n * 1000) + f('__MONOTONIC_TIMESTAMP', 1000 + n) +
      f('_BOOT_ID', BOOT) + f('PRIORITY', '4') + f('_SYSTEMD_UNIT', unit) + f('SYSLOG_IDENTIFIER', 'python3') +
      f('_PID', '4242') + f('MESSAGE', message) + '\n';
  });
  const r = spawnSync(JOURNAL_REMOTE, [`--output=${file}`, '-'], { input: entries.join('') });
  assert.equal(r.status, 0, `systemd-journal-remote failed: ${r.stderr}`);
  return lines.length;
}

// `n` spans made at once (a burst of requests does that) by replica r1,
// exported to 127.0.0.1:port. Returns {made, exported}.
async function engineSpans(port, n, prefix) {
  const api = deps.api();
  const sdk = deps.sdk();
  const { resourceFromAttributes } = deps.resources();
  const { OTLPTraceExporter } = deps.grpcExporter();
  // the JS SDK flushes a full queue as up to 2048 / 64 = 32 concurrent
  // exports (Python's exports one batch at a time): room for all of them
  const rec = new RecordingExporter(new OTLPTraceExporter({
    url: `http://127.0.0.1:${port}`, timeoutMillis: 20000, concurrencyLimit: 64,
  }));
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({ 'service.name': 'sglang', 'service.instance.id': 'r1' }),
    spanProcessors: [new sdk.BatchSpanProcessor(rec, {
      maxQueueSize: 2048, maxExportBatchSize: 64, scheduledDelayMillis: 500, exportTimeoutMillis: 30000,
    })],
  });
  const tracer = provider.getTracer('sglang', '0.5');
  for (let i = 0; i < n; i++) {
    tracer.startSpan(`${prefix} ${i}`, { kind: api.SpanKind.INTERNAL, attributes: { 'gen_ai.request.id': `${prefix}-${i}` } }).end();
  }
  await provider.forceFlush();
  await provider.shutdown();
  const exported = rec.results.filter((r) => r.code === 0).reduce((a, r) => a + r.spans, 0);
  return { made: n, exported };
}

// The engine's histograms on 127.0.0.1:port; observe() resolves once the
// exposer has recorded the observations (the next scrape sees them).
async function startLatency(h, port) {
  const proc = spawn('/usr/bin/python3', [path.join(__dirname, '..', 'latency_exposer.py'), String(port)],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  h.onCleanup(() => { proc.stdin.end(); proc.kill(); });
  const answers = [];
  const waiting = [];
  readline.createInterface({ input: proc.stdout }).on('line', (l) => {
    if (waiting.length) waiting.shift()(l); else answers.push(l);
  });
  const next = () => (answers.length ? Promise.resolve(answers.shift())
    : new Promise((resolve) => waiting.push(resolve)));
  assert.equal(await next(), 'ready');
  return {
    async observe(metric, seconds, count) {
      proc.stdin.write(`observe ${metric} ${seconds} ${count}\n`);
      assert.equal(await next(), 'ok');
    },
    // SGLang's gauges of requests running and waiting
    async load(running, queued) {
      proc.stdin.write(`load ${running} ${queued}\n`);
      assert.equal(await next(), 'ok');
    },
  };
}

module.exports = { JOURNAL_REMOTE, SDK_QUEUE_FULL, zmqFull, journal, engineSpans, startLatency };
