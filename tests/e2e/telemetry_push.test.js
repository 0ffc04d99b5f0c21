// tests/e2e/telemetry_push.test.js: the collector's own telemetry pushed,
// as upstream writes it (service.telemetry.metrics.readers[].periodic with
// an otlp exporter), on the real binary: spans sent (the official JS SDK's
// OTLP/HTTP exporter) and requests refused (malformed), then the pushes the
// gateway receives, decoded by the independent decoder (protobufjs from the
// official protos, lib/signal_gateway.js), carry the collector's counts:
// accepted spans equal to what was sent, the refused requests and spans,
// the exporter's sent spans; they come with the reader's header, gzip, at
// the reader's URL; the fence of the config's first metrics pipeline (a
// filter dropping the otelcol_process_* metrics) applies to them; and a
// reload (SIGHUP) keeps the push going with the counts carried over. Then
// over grpc (a @grpc/grpc-js MetricsService): the pull reader's endpoint
// is the one pushed, with its names (_total), headers_list as metadata,
// and no fence when the config has no metrics pipeline. Every wait is on
// the gateway having received a push, or on the collector's own /metrics.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');

const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const deps = require('./lib/deps');
const { SignalGateway, decode } = require('./lib/signal_gateway');
const { makeExporter, sendSpans } = require('./lib/senders');

const grpc = deps.grpc();

const KEY = 'push-key-7f3a$not-an-env-ref';

function config() {
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ http: envPort('HTTP') }) },
    processors: {
      'filter/fence': { error_mode: 'ignore', metrics: { metric: ['IsMatch(name, "^otelcol_process_")'] } },
    },
    exporters: {
      'otlphttp/traces': otlphttp('http://127.0.0.1:${env:SF_GW}'),
      'otlphttp/metrics': otlphttp('http://127.0.0.1:${env:SF_GW}'),
    },
    telemetry: {
      resource: { 'service.name': 'spanfence-under-test' },
      metrics: {
        address: `127.0.0.1:${envPort('METRICS')}`,
        readers: [
          {
            periodic: {
              interval: 1000,
              timeout: 5000,
              exporter: {
                otlp: {
                  protocol: 'http/protobuf',
                  endpoint: 'http://127.0.0.1:${env:SF_GW}/v1/metrics',
                  compression: 'gzip',
                  timeout: 5000,
                  headers: [{ name: 'x-api-key', value: '${env:SF_PUSH_KEY}' }],
                },
              },
            },
          },
        ],
      },
    },
    pipelines: {
      traces: { receivers: ['otlp'], exporters: ['otlphttp/traces'] },
      metrics: { receivers: ['otlp'], processors: ['filter/fence'], exporters: ['otlphttp/metrics'] },
    },
  });
}

// The value of `name` with exactly the attributes `attrs` in one push (its
// points), or undefined.
function pointValue(points, name, attrs) {
  const same = (a) => Object.keys(a).length === Object.keys(attrs).length &&
    Object.entries(attrs).every(([k, v]) => a[k] === v);
  const hit = points.filter((p) => p.name === name && same(p.attributes));
  if (hit.length > 1) throw new Error(`${name} ${JSON.stringify(attrs)}: ${hit.length} points in one push`);
  return hit.length ? hit[0].value : undefined;
}

test('the periodic reader pushes the collector\'s counts through the metrics fence', async () => {
  await harness('telemetry_push', async (h) => {
    const gw = new SignalGateway('telemetry gateway');
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = { SF_HTTP_PORT: await freePort(), SF_METRICS_PORT: await freePort(), SF_GW: gw.port };
    const env = { ...Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)])), SF_PUSH_KEY: KEY };
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), env, grpcPort: ports.SF_HTTP_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();
    await sf.waitLog(/readers\[0\]: pushing the collector's own metrics .* through the processors of pipeline 'metrics' \(filter\/fence\)/,
      'the push said at start, with its fence');

    // spans: 30 accepted, through the official SDK's OTLP/HTTP exporter
    const sent = 30;
    const exporter = makeExporter('http-protobuf', { httpPort: ports.SF_HTTP_PORT, compression: 'none' });
    await sendSpans(exporter, { n: sent, batchSize: 10, prefix: 'push' });
    await exporter.shutdown();
    // refusals: two malformed requests, one of 3 spans (a span's name
    // given twice: the whole request is refused), one not protobuf
    const post = (type, body) => fetch(`http://127.0.0.1:${ports.SF_HTTP_PORT}/v1/traces`, {
      method: 'POST', headers: { 'Content-Type': type }, body,
    });
    const span = (i, extra = '') => `{"traceId":"${'ab'.repeat(16)}","spanId":"${String(i).padStart(16, '0')}",` +
      `"name":"s${i}","startTimeUnixNano":"1","endTimeUnixNano":"2"${extra}}`;
    let r = await post('application/json', `{"resourceSpans":[{"scopeSpans":[{"spans":[${span(1)},` +
      `${span(2, ',"name":"again"')},${span(3)}]}]}]}`);
    assert.equal(r.status, 400, await r.text());
    r = await post('application/x-protobuf', Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]));
    assert.equal(r.status, 400, await r.text());
    const HTTP = { receiver: 'otlp', transport: 'http' };
    const own = await sf.waitMetrics((m) => m.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/traces' }) === sent,
      'the spans exported');
    assert.equal(own.must('spanfence_receiver_refused_requests', { ...HTTP, reason: 'malformed' }), 2);
    assert.equal(own.must('otelcol_receiver_refused_spans', { ...HTTP, reason: 'malformed' }), 3);

    // a push made after all that carries it
    const pushes = () => gw.of('metrics').filter((q) => q.status === 200);
    const latest = () => {
      // each push is one request; its points are the last rec.items points
      const done = pushes();
      if (done.length === 0) return [];
      const n = done[done.length - 1].items;
      return gw.points.slice(gw.points.length - n);
    };
    await gw.waitFor(() => pointValue(latest(), 'otelcol_exporter_sent_spans', { exporter: 'otlphttp/traces' }) === sent,
      `a push with otelcol_exporter_sent_spans ${sent}`);
    const points = latest();
    assert.equal(pointValue(points, 'otelcol_receiver_accepted_spans', HTTP), sent, 'accepted spans as sent');
    assert.equal(pointValue(points, 'spanfence_receiver_refused_requests', { ...HTTP, reason: 'malformed' }), 2,
      'the refusals');
    assert.equal(pointValue(points, 'otelcol_receiver_refused_spans', { ...HTTP, reason: 'malformed' }), 3,
      'the refused spans');
    assert.equal(pointValue(points, 'otelcol_receiver_refused_spans', { ...HTTP, reason: 'queue_full' }), 0);
    assert.equal(pointValue(points, 'spanfence_receiver_requests', HTTP), own.must('spanfence_receiver_requests', HTTP));
    // counters are cumulative sums; the series' target labels as upstream's prometheus receiver sets them
    const acc = points.find((p) => p.name === 'otelcol_receiver_accepted_spans' && p.attributes.receiver === 'otlp');
    assert.equal(acc.type, 'sum');
    assert.equal(acc.resource['service.name'], 'spanfence-under-test');
    assert.equal(acc.resource['service.instance.id'], `127.0.0.1:${ports.SF_METRICS_PORT}`);

    // the fence: the first metrics pipeline's filter ran on the push
    const names = new Set(points.map((p) => p.name));
    assert.ok(names.size > 10, `a push of the collector's series: ${[...names].join(', ')}`);
    const fenced = [...names].filter((n) => n.startsWith('otelcol_process_'));
    assert.deepEqual(fenced, [], 'metrics the fence drops reached the gateway');
    const before = await sf.metrics();
    assert.ok(before.get('otelcol_process_uptime') !== undefined, 'control: the endpoint serves what the fence drops');
    assert.ok(before.must('otelcol_processor_filter_datapoints_filtered', { processor: 'filter/fence' }) > 0,
      'the filter counted what it dropped from the push');

    // how it came: the reader's URL, header and compression
    const req = pushes()[pushes().length - 1];
    assert.equal(req.path, '/v1/metrics');
    assert.equal(req.headers['x-api-key'], KEY, 'the header as given ($ kept, not expanded twice)');
    assert.equal(req.headers['content-encoding'], 'gzip');
    // nothing but the push and the spans reached the gateway
    assert.deepEqual(gw.of('logs'), []);
    assert.equal(gw.spans.length, sent);

    // reload: the push goes on, counts carried over (not reset, not doubled)
    const before_reload = pushes().length;
    sf.proc.kill('SIGHUP');
    await sf.waitLog(/reloaded: running with/, 'the reload');
    await sf.waitLog(/readers\[0\]: pushing the collector's own metrics/, 'the push said after the reload', { count: 2 });
    await gw.waitFor(() => pushes().length >= before_reload + 2, 'two pushes after the reload');
    const after = latest();
    assert.equal(pointValue(after, 'otelcol_receiver_accepted_spans', HTTP), sent, 'accepted spans after the reload');
    assert.equal(pointValue(after, 'spanfence_receiver_refused_requests', { ...HTTP, reason: 'malformed' }), 2);
    assert.equal(pointValue(after, 'otelcol_receiver_refused_spans', { ...HTTP, reason: 'malformed' }), 3);
    assert.deepEqual([...new Set(after.map((p) => p.name))].filter((n) => n.startsWith('otelcol_process_')), []);
    await sf.stop();
  });
});

// OTLP/gRPC MetricsService/Export: each call's body and metadata.
function grpcMetricsSink() {
  const got = [];
  const server = new grpc.Server();
  const path = '/opentelemetry.proto.collector.metrics.v1.MetricsService/Export';
  server.addService({
    Export: {
      path, requestStream: false, responseStream: false,
      requestSerialize: (b) => b, requestDeserialize: (b) => b,
      responseSerialize: (b) => b, responseDeserialize: (b) => b,
    },
  }, {
    Export: (call, cb) => {
      got.push({ points: decode('metrics', call.request), key: call.metadata.get('x-api-key') });
      for (const w of waiters.slice()) w();
      cb(null, Buffer.alloc(0));
    },
  });
  const waiters = [];
  const waitFor = (pred, what, timeoutMs = 30000) => new Promise((resolve, reject) => {
    if (pred()) return resolve();
    const check = () => { if (pred()) { clearTimeout(timer); waiters.splice(waiters.indexOf(check), 1); resolve(); } };
    const timer = setTimeout(() => { waiters.splice(waiters.indexOf(check), 1); reject(new Error(`grpc sink: timed out waiting for ${what}`)); }, timeoutMs);
    waiters.push(check);
  });
  return new Promise((resolve, reject) => server.bindAsync('127.0.0.1:0',
    grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve({
      got, port, waitFor, close: () => Promise.resolve(server.forceShutdown()),
    }))));
}

test('over grpc, from the pull reader\'s endpoint, with no metrics pipeline', async () => {
  await harness('telemetry_push_grpc', async (h) => {
    const sink = await grpcMetricsSink();
    h.onCleanup(() => sink.close());
    const gw = new SignalGateway('traces gateway');
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = { SF_HTTP_PORT: await freePort(), SF_METRICS_PORT: await freePort() };
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: collectorConfig({
        receivers: { otlp: otlpReceiver({ http: ports.SF_HTTP_PORT }) },
        exporters: { 'otlphttp/traces': otlphttp(gw.port) },
        telemetry: {
          metrics: {
            readers: [
              { pull: { exporter: { prometheus: { host: '127.0.0.1', port: ports.SF_METRICS_PORT } } } },
              { periodic: {
                interval: 1000,
                exporter: {
                  otlp: { protocol: 'grpc', endpoint: `http://127.0.0.1:${sink.port}`, headers_list: 'x-api-key=grpc%20key' },
                },
              } },
            ],
          },
        },
        pipelines: { traces: { receivers: ['otlp'], exporters: ['otlphttp/traces'] } },
      }),
      grpcPort: ports.SF_HTTP_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();
    await sf.waitLog(/readers\[1\]: pushing the collector's own metrics .*\(grpc\).* with no processor/,
      'the push said, unfenced (no metrics pipeline)');
    const sent = 12;
    const exporter = makeExporter('http-protobuf', { httpPort: ports.SF_HTTP_PORT, compression: 'none' });
    await sendSpans(exporter, { n: sent, batchSize: 4, prefix: 'grpc-push' });
    await exporter.shutdown();
    const HTTP = { receiver: 'otlp', transport: 'http' };
    // the pull reader names counters with _total: the push carries the endpoint's names
    const value = (g) => {
      const p = g.points.filter((x) => x.name === 'otelcol_receiver_accepted_spans_total' &&
        x.attributes.receiver === 'otlp' && Object.keys(x.attributes).length === 2);
      return p.length === 1 ? p[0].value : undefined;
    };
    await sink.waitFor(() => sink.got.length > 0 && value(sink.got[sink.got.length - 1]) === sent,
      `a push with ${sent} accepted spans`);
    const last = sink.got[sink.got.length - 1];
    assert.deepEqual(last.key, ['grpc key'], 'headers_list as metadata, %-decoded');
    assert.ok(last.points.some((p) => p.name === 'otelcol_process_uptime_seconds_total'),
      'no fence: the process metrics go too');
    assert.equal(sf.exit, null);
    await sf.stop();
  });
});
