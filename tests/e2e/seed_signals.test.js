// tests/e2e/seed_signals.test.js: the seed deployment's otelcol-contrib config
// (configs/otelcol-seed.yaml, upstream layout, three pipelines, health_check,
// telemetry) run by spanfence with the file unchanged (its listening
// addresses moved to free loopback ports with --set, as an operator would),
// the official OpenTelemetry JS SDK's trace, log and metric exporters sending
// over OTLP/gRPC, HTTP protobuf and HTTP JSON, a stand-in gateway for traces
// and one for telemetry, each body decoded independently (issue 25):
//  - as written: every span, log record and metric point arrives, each
//    signal through its own exporter (traces only at the traces gateway, with
//    its bearer token; logs and metrics only at the telemetry gateway, with
//    its api key), traces allowlisted, vm.id upserted on every log record and
//    data point, resourcedetection/system's host.name (replacing the one the
//    SDK sent: override) and os.type on every log and metric resource and
//    none on a span's (the traces allowlist keeps service.name only),
//    accounting per signal adds up, health 200;
//  - with configs/otelcol-seed-fence.yaml as a second --config: only what the
//    fence allows: SGLang's statistics bodies kept, every other body gone,
//    log and datapoint attributes allowlisted, metric names outside sglang:*
//    'other', descriptions gone, units in their declared set, and no planted
//    secret anywhere in what either gateway received.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { SignalGateway } = require('./lib/signal_gateway');
const { Spanfence, harness, freePort } = require('./lib/spanfence');
const senders = require('./lib/senders');
const S = require('./lib/signals');

const SOURCE = process.env.SF_SOURCE_DIR || path.resolve(__dirname, '..', '..');
const SEED = path.join(SOURCE, 'configs', 'otelcol-seed.yaml');
const FENCE = path.join(SOURCE, 'configs', 'otelcol-seed-fence.yaml');
const N = 12;         // spans and log records per protocol
const SCRAPES = 2;    // metric collections per protocol
const VM_ID = 'cvm-e2e-0042';
const SECRETS = ['secret', 'SECRET', 'tell me', '@example.com', 'token=', 'cvm-host'];
const SPAN_KEEP = ['gen_ai.request.id', 'gen_ai.usage.prompt_tokens', 'gen_ai.usage.completion_tokens', 'gen_ai.latency.e2e'];

const pick = (o, keys) => Object.fromEntries(keys.filter((k) => k in o).map((k) => [k, o[k]]));
const json = (v) => JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? x.toString() : x));
// a point's value as the gateway decoded it against the SDK's
const sameValue = (got, sent) => (typeof sent === 'number' ? got === sent
  : got !== null && typeof got === 'object' && got.count === sent.count && Math.abs(got.sum - sent.sum) < 1e-9);

async function startSeed(h, name, { fence }) {
  const traces = new SignalGateway('traces gateway');
  const telemetry = new SignalGateway('telemetry gateway');
  await traces.start();
  await telemetry.start();
  h.onCleanup(() => traces.stop());
  h.onCleanup(() => telemetry.stop());
  const ports = { grpc: await freePort(), http: await freePort(), metrics: await freePort(), health: await freePort() };
  const args = [];
  if (fence) args.push('--config', `file:${FENCE}`);
  for (const s of [
    `receivers.otlp.protocols.grpc.endpoint=127.0.0.1:${ports.grpc}`,
    `receivers.otlp.protocols.http.endpoint=127.0.0.1:${ports.http}`,
    `extensions.health_check.endpoint=127.0.0.1:${ports.health}`,
    `service.telemetry.metrics.address=127.0.0.1:${ports.metrics}`,
  ]) args.push('--set', s);
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name,
    config: fs.readFileSync(SEED, 'utf8'),   // the operator's file, as it is
    env: {
      VM_ID,
      TRACES_GATEWAY_ENDPOINT: traces.url,
      TRACES_GATEWAY_TOKEN: 'traces-token-e2e',
      TELEMETRY_GATEWAY_ENDPOINT: telemetry.url,
      TELEMETRY_GATEWAY_API_KEY: 'telemetry-key-e2e',
    },
    grpcPort: ports.grpc,
    metricsPort: ports.metrics,
    args,
  }));
  await sf.start();
  const hz = await fetch(`http://127.0.0.1:${ports.health}/`);
  assert.equal(hz.status, 200, `${name}: health_check answers 200 with three pipelines running`);
  await hz.text();
  return { sf, traces, telemetry, ports };
}

// Every protocol sends N spans, N log records and SCRAPES metric
// collections; each batch is checked once it has all arrived.
async function sendAll(ctx, check) {
  const { traces, telemetry, ports } = ctx;
  const totals = { spans: 0, logs: 0, points: 0, byTransport: { grpc: { logs: 0, points: 0 }, http: { logs: 0, points: 0 } } };
  for (const protocol of S.PROTOCOLS) {
    const transport = protocol === 'grpc' ? 'grpc' : 'http';
    const where = `${protocol}`;

    const t0 = traces.spans.length;
    const tex = senders.makeExporter(protocol, { grpcPort: ports.grpc, httpPort: ports.http, compression: 'none' });
    const st = await senders.sendSpans(tex, { n: N, batchSize: 5, prefix: protocol });
    assert.deepEqual(st.results.filter((r) => r.code !== 0), [], `${where}: every trace export accepted`);
    totals.spans += N;
    await traces.waitFor(() => traces.spans.length >= t0 + N, `${where}: ${N} spans`);
    check.spans(st.sent, traces.spans.slice(t0), where);

    const l0 = telemetry.logs.length;
    const lex = S.makeExporter('logs', protocol, { grpcPort: ports.grpc, httpPort: ports.http });
    const sl = await S.sendLogs(lex, { n: N, batchSize: 5, prefix: protocol });
    assert.deepEqual(sl.results.filter((r) => r.code !== 0), [], `${where}: every log export accepted`);
    assert.equal(sl.results.reduce((a, r) => a + r.items, 0), N, `${where}: the SDK exported every record`);
    totals.logs += N;
    totals.byTransport[transport].logs += N;
    await telemetry.waitFor(() => telemetry.logs.length >= l0 + N, `${where}: ${N} log records`);
    check.logs(sl.sent, telemetry.logs.slice(l0), where);

    const p0 = telemetry.points.length;
    const mex = S.makeExporter('metrics', protocol, { grpcPort: ports.grpc, httpPort: ports.http });
    const sm = await S.sendMetrics(mex, { scrapes: SCRAPES, prefix: protocol });
    assert.deepEqual(sm.results.filter((r) => r.code !== 0), [], `${where}: every metrics export accepted`);
    const points = sm.results.reduce((a, r) => a + r.items, 0);
    assert.ok(points >= SCRAPES * 12, `${where}: the SDK exported ${points} points`);
    totals.points += points;
    totals.byTransport[transport].points += points;
    await telemetry.waitFor(() => telemetry.points.length >= p0 + points, `${where}: ${points} metric points`);
    // every collection's points (in whatever order the exports arrived);
    // sm.sent is the last collection: its values are the final ones
    check.metrics(sm.sent, telemetry.points.slice(p0), where);
  }
  return totals;
}

// Each signal through its own exporter, and every count adds up.
async function checkRouting(ctx, totals) {
  const { sf, traces, telemetry } = ctx;
  assert.equal(traces.spans.length, totals.spans, 'no span twice');
  assert.equal(telemetry.logs.length, totals.logs, 'no log record twice');
  assert.equal(telemetry.points.length, totals.points, 'no metric point twice');
  assert.deepEqual([...new Set(traces.requests.map((r) => r.path))], ['/v1/traces'], 'the traces gateway got traces only');
  assert.deepEqual([...new Set(telemetry.requests.map((r) => r.path))].sort(), ['/v1/logs', '/v1/metrics'],
    'the telemetry gateway got logs and metrics only');
  for (const r of traces.requests) {
    assert.equal(r.status, 200);
    assert.equal(r.headers.authorization, 'Bearer traces-token-e2e', 'the traces exporter\'s header from ${env:}');
    assert.equal(r.headers['x-api-key'], undefined);
    assert.equal(r.headers['content-encoding'], 'gzip');
  }
  for (const r of telemetry.requests) {
    assert.equal(r.status, 200);
    assert.equal(r.headers['x-api-key'], 'telemetry-key-e2e', 'the telemetry exporter\'s header from ${env:}');
    assert.equal(r.headers['x-vm-id'], VM_ID);
    assert.equal(r.headers.authorization, undefined, 'the traces token never goes to the telemetry gateway');
  }

  const m = await sf.waitMetrics((x) =>
    x.get('otelcol_exporter_sent_spans', { exporter: 'otlphttp/traces' }) === totals.spans &&
    x.get('otelcol_exporter_sent_log_records', { exporter: 'otlphttp/telemetry' }) === totals.logs &&
    x.get('otelcol_exporter_sent_metric_points', { exporter: 'otlphttp/telemetry' }) === totals.points,
  'every item counted as sent by its own exporter');
  for (const transport of ['grpc', 'http']) {
    assert.equal(m.must('otelcol_receiver_accepted_log_records', { receiver: 'otlp', transport }),
      totals.byTransport[transport].logs, `accepted log records over ${transport}`);
    assert.equal(m.must('otelcol_receiver_accepted_metric_points', { receiver: 'otlp', transport }),
      totals.byTransport[transport].points, `accepted metric points over ${transport}`);
  }
  assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp' }), totals.spans);
  for (const [items, exporter] of [['spans', 'otlphttp/traces'], ['log_records', 'otlphttp/telemetry'], ['metric_points', 'otlphttp/telemetry']]) {
    assert.equal(m.must(`otelcol_receiver_refused_${items}`, { receiver: 'otlp' }), 0, `refused ${items}`);
    assert.equal(m.must(`otelcol_exporter_send_failed_${items}`, { exporter }), 0, `${exporter} send_failed ${items}`);
    assert.equal(m.must(`otelcol_exporter_enqueue_failed_${items}`, { exporter }), 0, `${exporter} enqueue_failed ${items}`);
  }
  assert.equal(m.get('otelcol_exporter_sent_log_records', { exporter: 'otlphttp/traces' }) || 0, 0,
    'the traces exporter sent no log record');
  assert.equal(m.get('otelcol_exporter_sent_metric_points', { exporter: 'otlphttp/traces' }) || 0, 0,
    'the traces exporter sent no metric point');
  // the OTLP logs/metrics are served, not refused as unexported
  assert.equal(m.get('spanfence_receiver_unexported_requests', { signal: 'logs' }) || 0, 0);
  assert.equal(m.get('spanfence_receiver_unexported_requests', { signal: 'metrics' }) || 0, 0);
}

// Traces: the seed's allowlist, in both runs.
function checkSpans(sent, got, where) {
  assert.equal(got.length, sent.length, `${where}: span count`);
  const byId = new Map(got.map((s) => [s.spanId, s]));
  for (const s of sent) {
    const g = byId.get(s.spanContext().spanId);
    assert.ok(g, `${where}: span '${s.name}' arrived`);
    assert.deepEqual(g.attributes, pick(s.attributes, SPAN_KEEP), `${where}: span '${s.name}' attributes`);
    assert.equal(g.status ? g.status.message : '', '', `${where}: status message cleared`);
    assert.deepEqual(g.resource, { 'service.name': s.resource.attributes['service.name'] }, `${where}: resource allowlisted`);
  }
  for (const secret of SECRETS) assert.ok(!json(got).includes(secret), `${where}: '${secret}' in a span`);
}

test('seed config unchanged: three signals x gRPC/HTTP protobuf/HTTP JSON, each through its own exporter', async () => {
  await harness('seed_signals_unchanged', async (h) => {
    const ctx = await startSeed(h, 'seed', { fence: false });
    const totals = await sendAll(ctx, {
      spans: checkSpans,
      // upstream's behaviour for these pipelines: everything passes, the VM id is upserted
      logs(sent, got, where) {
        assert.equal(got.length, sent.length, `${where}: log record count`);
        const byBody = new Map(got.map((g) => [g.body, g]));
        for (const s of sent) {
          const g = byBody.get(s.body);
          assert.ok(g, `${where}: record '${s.body.slice(0, 40)}' arrived`);
          assert.deepEqual(g.attributes, { ...s.attributes, 'vm.id': VM_ID }, `${where}: attributes plus vm.id`);
          assert.equal(g.severityText, s.severityText);
          assert.equal(g.severityNumber, s.severityNumber);
          assert.equal(g.eventName, s.eventName || '');
          assert.deepEqual(pick(g.resource, ['service.name', 'host.name', 'os.type']),
            { 'service.name': 'sglang', 'host.name': os.hostname(), 'os.type': 'linux' },
            `${where}: resourcedetection/system's attributes on the log resource (host.name overridden)`);
        }
      },
      metrics(sent, got, where) {
        const want = sent.reduce((a, m) => a + m.points.length, 0);
        assert.equal(got.length, SCRAPES * want, `${where}: points of every collection`);
        for (const m of sent) {
          const g = got.filter((p) => p.name === m.name);
          assert.equal(g.length, SCRAPES * m.points.length, `${where}: '${m.name}' points`);
          assert.ok(g.some((p) => sameValue(p.value, m.points[0].value)), `${where}: '${m.name}' final value`);
          for (const p of g) {
            assert.equal(p.description, m.description);
            assert.equal(p.unit, m.unit);
            assert.deepEqual(p.attributes, { ...m.points[0].attributes, 'vm.id': VM_ID }, `${where}: '${m.name}' attributes plus vm.id`);
            assert.equal(p.resource['host.name'], os.hostname(), `${where}: '${m.name}' detected host.name`);
            assert.equal(p.resource['os.type'], 'linux', `${where}: '${m.name}' detected os.type`);
          }
        }
      },
    });
    await checkRouting(ctx, totals);
    await ctx.sf.stop();
  });
});

test('seed config + fence overlay: only what the fence allows leaves, for every signal', async () => {
  await harness('seed_signals_fenced', async (h) => {
    const ctx = await startSeed(h, 'seed-fenced', { fence: true });
    const totals = await sendAll(ctx, {
      spans: checkSpans,
      logs(sent, got, where) {
        assert.equal(got.length, sent.length, `${where}: log record count (a fenced record still arrives)`);
        const byLine = new Map(got.map((g) => [g.attributes['code.lineno'], g]));
        let kept = 0;
        for (const s of sent) {
          const g = byLine.get(s.attributes['code.lineno']);
          assert.ok(g, `${where}: record at line ${s.attributes['code.lineno']} arrived`);
          const want = { ...pick(s.attributes, S.LOG_KEEP), 'vm.id': VM_ID };
          // code.function leaves only as one of SGLang's statistics functions
          if (!/^log_(prefill|decode)_stats$/.test(want['code.function'])) delete want['code.function'];
          assert.deepEqual(g.attributes, want, `${where}: log attributes allowlisted, vm.id upserted after the fence`);
          if (s.kind === 'stats') {
            assert.equal(g.body, s.body, `${where}: a statistics line in its declared shape leaves`);
            kept++;
          } else {
            assert.ok(g.body === undefined || g.body === '', `${where}: an error body quoting a request must not leave: ${json(g.body)}`);
          }
          assert.equal(g.severityNumber, s.severityNumber);
          assert.equal(g.severityText, /^(INFO|ERROR)$/.test(s.severityText) ? s.severityText : '', `${where}: severity_text under its rule`);
          assert.equal(g.eventName, '', `${where}: event_name under its rule`);
          assert.deepEqual(g.resource, { 'service.name': 'sglang' }, `${where}: resource allowlisted`);
          assert.ok(/^sglang(\.[a-z_]+)*$/.test(g.scope.name) && g.scope.version === '', `${where}: scope ${json(g.scope)}`);
        }
        assert.ok(kept >= sent.length / 2, 'test data: most records are statistics lines');
        for (const secret of SECRETS) assert.ok(!json(got).includes(secret), `${where}: '${secret}' in a log record`);
      },
      metrics(sent, got, where) {
        const want = sent.reduce((a, m) => a + m.points.length, 0);
        assert.equal(got.length, SCRAPES * want, `${where}: points of every collection (a fenced point still arrives)`);
        const UNITS = ['s', '1', '{token}', '{request}', '{token}/s'];
        // SGLang's own names (the fence's exact set); 'sglang:num_aborted_requests'
        // (SGLang's is ..._total) is not one of them
        const kept = (name) => S.sglangSeries(0).some(([, n]) => n === name);
        for (const m of sent.filter((x) => kept(x.name))) {
          const g = got.filter((p) => p.name === m.name);
          assert.equal(g.length, SCRAPES * m.points.length, `${where}: '${m.name}' points`);
          for (const p of g) assert.equal(p.unit, UNITS.includes(m.unit) ? m.unit : '', `${where}: '${m.name}' unit under its rule`);
          assert.ok(g.some((p) => sameValue(p.value, m.points[0].value)), `${where}: '${m.name}' final value ${json(m.points[0].value)} in ${json(g.map((p) => p.value))}`);
        }
        const others = sent.filter((x) => !kept(x.name)).reduce((a, m) => a + m.points.length, 0);
        assert.ok(others > 0, 'test data: a metric name not SGLang\'s');
        assert.equal(got.filter((p) => p.name === 'other').length, SCRAPES * others, `${where}: names not SGLang's leave as 'other'`);
        for (const p of got) {
          assert.equal(p.description, '', `${where}: '${p.name}' description under its rule`);
          assert.ok(['', 's', '1', '{token}', '{request}', '{token}/s'].includes(p.unit), `${where}: unit '${p.unit}'`);
          assert.deepEqual(p.attributes, { ...S.METRIC_LABELS, 'vm.id': VM_ID }, `${where}: '${p.name}' datapoint attributes`);
          assert.deepEqual(p.resource, { 'service.name': 'sglang' }, `${where}: resource allowlisted`);
          assert.deepEqual(p.exemplars, []);
        }
        for (const secret of SECRETS) assert.ok(!json(got).includes(secret), `${where}: '${secret}' in a metric point`);
      },
    });
    await checkRouting(ctx, totals);
    await ctx.sf.stop();
  });
});
