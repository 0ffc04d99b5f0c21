// tests/e2e/dropin_upstream.test.js: an operator's otelcol-contrib command
// line and config, unchanged, on spanfence: the config in upstream's
// layout, split over two --config files and a --set, with health_check,
// service.telemetry.metrics.readers (pull Prometheus on its own port,
// resource labels), JSON logs on stderr and in a file. Checks that:
//  - the merged config is what runs: the second file moves the exporter
//    from a closed port to the gateway (the gateway gets the spans), --set
//    moves health_check's path (200 on /healthz, 404 on /);
//  - the reader's port serves upstream's names as a configured
//    Prometheus reader has them (_total, units, service_name label,
//    otel_signal / data_type, otelcol_process_*, target_info);
//  - every log line on stderr and in the file is a JSON object with
//    upstream's keys.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');

const { Gateway } = require('./lib/gateway');
const { Spanfence, harness, freePort, sleep } = require('./lib/spanfence');
const peers = require('./lib/peers');

function baseConfig(logFile) {
  return `receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:\${env:SF_GRPC_PORT}
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 256
  batch:
exporters:
  otlphttp:
    endpoint: http://127.0.0.1:\${env:SF_CLOSED_PORT}
    retry_on_failure: {initial_interval: 100ms, max_interval: 200ms}
  debug:
    verbosity: basic
extensions:
  health_check:
    endpoint: 127.0.0.1:\${env:SF_HEALTH_PORT}
  pprof:
    endpoint: localhost:1777
  zpages: {}
service:
  extensions: [health_check, pprof, zpages]
  telemetry:
    logs:
      level: info
      encoding: json
      output_paths: [stderr, ${logFile}]
    metrics:
      level: detailed
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: \${env:SF_METRICS_PORT}
                with_resource_constant_labels:
                  included: [service.name]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, batch]
      exporters: [otlphttp]
    metrics:
      receivers: [otlp]
      processors: [batch]
      exporters: [debug]
`;
}

const override = `exporters:
  otlphttp:
    endpoint: http://127.0.0.1:\${env:SF_GATEWAY_PORT}
    compression: zstd
`;

async function get(url) {
  try {
    const r = await fetch(url);
    return { status: r.status, body: await r.text() };
  } catch (_) {
    return null;
  }
}

function jsonLines(text, what) {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  assert.ok(lines.length > 0, `${what}: no log lines`);
  return lines.map((l) => {
    let o;
    try { o = JSON.parse(l); } catch (e) { throw new Error(`${what}: not JSON: ${l}`); }
    assert.match(o.level, /^(debug|info|warn|error)$/, `${what}: level in ${l}`);
    assert.match(o.ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/, `${what}: ts in ${l}`);
    assert.equal(typeof o.msg, 'string', `${what}: msg in ${l}`);
    return o;
  });
}

test('drop-in: upstream layout, two --config files, --set, health_check, readers, JSON logs', async () => {
  await harness('dropin_upstream', async (h) => {
    const gw = new Gateway();
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = {
      SF_GRPC_PORT: await freePort(),
      SF_METRICS_PORT: await freePort(),
      SF_HEALTH_PORT: await freePort(),
      SF_CLOSED_PORT: await freePort(),
      SF_GATEWAY_PORT: gw.port,
    };
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const logFile = path.join(h.dir, 'collector.log');
    const overridePath = path.join(h.dir, 'override.yaml');
    fs.writeFileSync(overridePath, override);
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: baseConfig(logFile),
      env,
      grpcPort: ports.SF_GRPC_PORT,
      metricsPort: ports.SF_METRICS_PORT,
      args: ['--config', `file:${overridePath}`, '--set', 'extensions.health_check.path=/healthz',
        '--feature-gates=-component.UseLocalHostAsDefaultHost'],
    }));
    await sf.start();

    // --set moved the health path; the service is running
    const hz = await get(`http://127.0.0.1:${ports.SF_HEALTH_PORT}/healthz`);
    assert.equal(hz && hz.status, 200, `health on /healthz: ${JSON.stringify(hz)}`);
    assert.equal(JSON.parse(hz.body).status, 'Server available');
    assert.equal((await get(`http://127.0.0.1:${ports.SF_HEALTH_PORT}/`)).status, 404);

    // the second file's endpoint is the one that runs: the gateway gets them
    const { results } = await peers.sendSdkSpans({ port: ports.SF_GRPC_PORT, n: 30, batchSize: 10 });
    assert.ok(results.every((r) => r.code === 0), `every export acknowledged: ${JSON.stringify(results)}`);
    const deadline = Date.now() + 20000;
    while (gw.spans.length < 30 && Date.now() < deadline) await sleep(50);
    assert.equal(gw.spans.length, 30, 'the gateway (the override\'s endpoint) got every span');
    assert.ok(gw.requests.every((r) => r.headers['content-encoding'] === 'zstd'),
      'the override\'s compression runs');

    // the reader's port: upstream names as a configured Prometheus reader has them
    const m = await sf.waitMetrics(
      (x) => x.get('otelcol_exporter_sent_spans_total', { exporter: 'otlphttp' }) === 30,
      'sent spans counted');
    const svc = { service_name: 'spanfence' };
    assert.equal(m.must('otelcol_receiver_accepted_spans_total',
      { receiver: 'otlp', transport: 'grpc', ...svc }), 30);
    assert.equal(m.must('otelcol_processor_incoming_items_total',
      { processor: 'batch', otel_signal: 'traces', ...svc }), 30);
    assert.equal(m.must('otelcol_exporter_queue_capacity',
      { exporter: 'otlphttp', data_type: 'traces', ...svc }) > 0, true);
    assert.equal(m.must('otelcol_processor_accepted_spans_total', { processor: 'memory_limiter', ...svc }), 30);
    assert.equal(m.must('otelcol_processor_refused_spans_total', { processor: 'memory_limiter', ...svc }), 0);
    assert.ok(m.must('otelcol_process_uptime_seconds_total', svc) > 0);
    assert.ok(m.must('otelcol_process_cpu_seconds_total', svc) > 0);
    assert.ok(m.must('otelcol_process_memory_rss_bytes', svc) > 1024 * 1024);
    assert.equal(m.get('otelcol_receiver_accepted_spans'), undefined, 'no unsuffixed names');
    const ti = m.samples.find((s) => s.name === 'target_info');
    assert.ok(ti, 'target_info');
    assert.equal(ti.labels.service_name, 'spanfence');
    assert.match(ti.labels.service_instance_id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    const old = await get('http://127.0.0.1:8888/metrics');
    assert.ok(old === null || !old.body.includes(ti.labels.service_instance_id),
      'nothing of this collector on the default port: the reader replaced it');

    await sf.stop();
    // JSON logs, on stderr and in the file, with upstream's keys
    const errLines = jsonLines(sf.stderr(), 'stderr');
    const fileLines = jsonLines(fs.readFileSync(logFile, 'utf8'), logFile);
    assert.ok(fileLines.some((o) => o.msg.includes('running with')), 'the start line is in the file');
    assert.ok(errLines.some((o) => o.msg === 'stopped'), 'the stop line is on stderr');
    assert.deepEqual(fileLines.map((o) => o.msg), errLines.map((o) => o.msg),
      'the file has every record stderr has');
    assert.ok(errLines.some((o) => o.level === 'warn' && /extension 'pprof' is not supported by spanfence and is ignored: spanfence is C/.test(o.msg)),
      'the config\'s warnings are log records too');
  });
});
