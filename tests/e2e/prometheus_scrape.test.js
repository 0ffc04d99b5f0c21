// tests/e2e/prometheus_scrape.test.js: the prometheus receiver scraping a
// real exposer (Debian's python3-prometheus-client, prometheus_exposer.py:
// SGLang's metric families, label names and bucket bounds) into a metrics
// pipeline with a fence (filter and transform) exporting OTLP/HTTP to a
// gateway. What arrives is decoded independently (protobufjs, the official
// protos) and compared with what the exposer holds: the same series,
// values, types, bounds and counts, with upstream's resource attributes.
// Beside it three targets that must be refused without disturbing it: one
// that never ends its body (scrape_timeout), the same exposer over a
// sample_limit and over a body_size_limit: up 0 for each, the reason in
// the log and counted, while the SGLang target is still scraped. Then
// Debian's Prometheus server scrapes the same exposer and its HTTP API
// (/api/v1/query) must read the same values. Debian's
// prometheus-node-exporter (Go's client library, text format 0.0.4, with
// a summary) is scraped by both too: the same series, and spanfence's
// types as its TYPE lines say.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');
const path = require('node:path');
const { spawn } = require('node:child_process');

const { Spanfence, harness, freePort, waitUntil } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, otlphttp, envPort } = require('./lib/config');
const { startExposer } = require('./lib/exposer');
const { SignalGateway, root } = require('./lib/signal_gateway');

const PROMETHEUS = '/usr/bin/prometheus';
const NODE_EXPORTER = '/usr/bin/prometheus-node-exporter';
// collectors whose series do not come and go between scrapes
const NODE_ARGS = ['--collector.disable-defaults', '--collector.loadavg', '--collector.meminfo',
  '--collector.uname', '--collector.time'];
const Req = root.opentelemetry.proto.collector.metrics.v1.ExportMetricsServiceRequest;
const KEPT = ['model_name', 'engine_type', 'tp_rank', 'pp_rank', 'cache_source', 'replica'];

function config() {
  return collectorConfig({
    receivers: {
      otlp: otlpReceiver({ grpc: envPort('GRPC') }),
      prometheus: {
        config: {
          global: { scrape_interval: '1s', scrape_timeout: '1s' },
          scrape_configs: [
            {
              job_name: 'sglang',
              static_configs: [{ targets: [`127.0.0.1:${envPort('EXPOSER')}`], labels: { replica: 'r1' } }],
            },
            { job_name: 'hang', static_configs: [{ targets: [`127.0.0.1:${envPort('HANG')}`] }] },
            {
              job_name: 'limited',
              sample_limit: 10,
              static_configs: [{ targets: [`127.0.0.1:${envPort('EXPOSER')}`] }],
            },
            {
              job_name: 'big',
              body_size_limit: '1KiB',
              static_configs: [{ targets: [`127.0.0.1:${envPort('EXPOSER')}`] }],
            },
            { job_name: 'node', static_configs: [{ targets: [`127.0.0.1:${envPort('NODE')}`] }] },
          ],
        },
      },
    },
    processors: {
      'filter/names': { error_mode: 'ignore', metrics: { metric: ['name == "sglang:num_queue_reqs"'] } },
      'transform/fence': {
        error_mode: 'ignore',
        metric_statements: [
          {
            context: 'datapoint',
            statements: [`keep_keys(attributes, ${JSON.stringify(KEPT)})`],
          },
        ],
      },
    },
    exporters: { 'otlphttp/gw': otlphttp(`http://127.0.0.1:${envPort('GATEWAY')}`) },
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], exporters: ['otlphttp/gw'] },
      metrics: {
        receivers: ['prometheus'],
        processors: ['filter/names', 'transform/fence'],
        exporters: ['otlphttp/gw'],
      },
    },
  });
}

// A target that answers 200 and a first line, then never ends its body.
// The requests it got (their head) are in .requests.
async function startHang(h) {
  const sockets = new Set();
  const requests = [];
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on('error', () => {});
    s.once('data', (d) => {
      requests.push(d.toString('latin1'));
      s.write('HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n' +
        'Content-Length: 100000\r\n\r\nsglang:num_running_reqs 1\n');
    });
    s.on('close', () => sockets.delete(s));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  h.onCleanup(() => { for (const s of sockets) s.destroy(); server.close(); });
  return { port: server.address().port, requests };
}

const num = (v) => (v === 'NaN' ? NaN : v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v));
const same = (a, b) => (Number.isNaN(a) && Number.isNaN(b)) || a === b;
const attrsOf = (kvs) => Object.fromEntries((kvs || []).map((kv) => [kv.key, kv.value.stringValue]));
const key = (name, attrs) => `${name}${JSON.stringify(Object.keys(attrs).sort().map((k) => [k, attrs[k]]))}`;
const long = (v) => Number(v);

// Every point of every accepted request: {job, name, type, point, metric}.
function decodeAll(gw) {
  const out = [];
  for (const r of gw.of('metrics')) {
    if (r.status !== 200 || !r.body) continue;
    const req = Req.decode(r.body);
    for (const rm of req.resourceMetrics) {
      const resource = attrsOf(rm.resource && rm.resource.attributes);
      for (const sm of rm.scopeMetrics) {
        for (const m of sm.metrics) {
          const type = m.data;
          for (const p of m[type].dataPoints) {
            out.push({ resource, job: resource['service.name'], name: m.name, description: m.description,
              type, metric: m[type], point: p, attrs: attrsOf(p.attributes), time: long(p.timeUnixNano) });
          }
        }
      }
    }
  }
  return out;
}

// The points of the first scrape of `job` (its first up point's time).
function firstScrape(points, job) {
  const up = points.find((p) => p.job === job && p.name === 'up');
  assert.ok(up, `no scrape of job ${job} arrived`);
  return points.filter((p) => p.job === job && p.time === up.time);
}

// The fence's view of the exposer's labels: what keep_keys keeps, plus the
// target's static label.
function fenced(labels) {
  const out = { replica: 'r1' };
  for (const [k, v] of Object.entries(labels)) if (KEPT.includes(k)) out[k] = v;
  return out;
}

async function startNodeExporter(h, port) {
  const proc = spawn(NODE_EXPORTER, [`--web.listen-address=127.0.0.1:${port}`, ...NODE_ARGS],
    { stdio: ['ignore', 'ignore', 'inherit'] });
  h.onCleanup(() => proc.kill());
  let text = '';
  const deadline = Date.now() + 20000;
  while (text === '' && proc.exitCode === null && Date.now() < deadline) {
    try {
      const r = await fetch(`http://127.0.0.1:${port}/metrics`);
      if (r.status === 200) text = await r.text();
    } catch (_) { await new Promise((r) => setTimeout(r, 100)); }
  }
  assert.ok(text, 'node-exporter did not answer');
  return text;
}

// {family: type} from exposition text's TYPE lines.
function typeLines(text) {
  const out = {};
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) out[m[1]] = m[2];
  return out;
}

// Our points as the samples Prometheus stores: histograms and summaries
// back to _bucket/quantile, _sum, _count (and _created from the start).
function asSamples(points) {
  const ours = new Map();
  for (const p of points) {
    const attrs = { ...p.attrs };
    if (p.type === 'histogram') {
      let cum = 0;
      p.point.bucketCounts.forEach((c, i) => {
        cum += long(c);
        const le = i < p.point.explicitBounds.length ? p.point.explicitBounds[i] : '+Inf';
        ours.set(key(`${p.name}_bucket`, { ...attrs, le: String(le) }), cum);
      });
    } else if (p.type === 'summary') {
      for (const q of p.point.quantileValues || []) ours.set(key(p.name, { ...attrs, quantile: String(q.quantile || 0) }), q.value);
    }
    if (p.type === 'histogram' || p.type === 'summary') {
      ours.set(key(`${p.name}_count`, attrs), long(p.point.count));
      ours.set(key(`${p.name}_sum`, attrs), p.point.sum || 0);
    } else {
      ours.set(key(p.name, attrs), p.point.asDouble);
    }
  }
  return ours;
}

async function startPrometheus(h, exposerPort, nodePort) {
  const dir = path.join(h.dir, 'prometheus');
  fs.mkdirSync(dir, { recursive: true });
  const port = await freePort();
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), `global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: sglang
    static_configs:
      - targets: ["127.0.0.1:${exposerPort}"]
        labels: {replica: r1}
  - job_name: node
    static_configs:
      - targets: ["127.0.0.1:${nodePort}"]
`);
  const log = fs.openSync(path.join(dir, 'prometheus.log'), 'w');
  const proc = spawn(PROMETHEUS, [`--config.file=${path.join(dir, 'prometheus.yml')}`,
    `--storage.tsdb.path=${path.join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
  { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  h.onCleanup(() => proc.kill());
  const query = async (q) => {
    const r = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(q)}`);
    const j = await r.json();
    assert.equal(j.status, 'success', JSON.stringify(j));
    return j.data.result;
  };
  return { proc, query, logPath: path.join(dir, 'prometheus.log') };
}

test('the prometheus receiver scrapes a real SGLang-shaped exposer into the fenced metrics pipeline, as exposed', async () => {
  await harness('prometheus_scrape', async (h) => {
    const gw = new SignalGateway('metrics gateway');
    gw.keepBodies = true;
    await gw.start();
    h.onCleanup(() => gw.stop());
    const ports = {
      SF_GRPC_PORT: await freePort(), SF_METRICS_PORT: await freePort(), SF_GATEWAY_PORT: gw.port,
      SF_EXPOSER_PORT: await freePort(), SF_NODE_PORT: await freePort(),
    };
    const hang = await startHang(h);
    ports.SF_HANG_PORT = hang.port;
    const exposed = await startExposer(h, ports.SF_EXPOSER_PORT);
    const nodeText = await startNodeExporter(h, ports.SF_NODE_PORT);
    const env = Object.fromEntries(Object.entries(ports).map(([k, v]) => [k, String(v)]));
    const sf = h.track(new Spanfence({
      dir: h.dir, config: config(), env, grpcPort: ports.SF_GRPC_PORT, metricsPort: ports.SF_METRICS_PORT,
    }));
    await sf.start();

    // every refused target refused for its reason, while the SGLang one is scraped twice
    const failed = (reason, job) => (m) => (m.get('spanfence_receiver_prometheus_failed_scrapes',
      { job, reason }) || 0) >= 1;
    await sf.waitMetrics((m) => failed('timeout', 'hang')(m) && failed('sample_limit', 'limited')(m) &&
      failed('body_size_limit', 'big')(m), 'a refusal of each bad target');
    await sf.waitLog(/scrape of http:\/\/127\.0\.0\.1:\d+\/metrics \(job hang\) refused \(timeout\)/, 'the timeout');
    await sf.waitLog(/\(job limited\) refused \(sample_limit\): line \d+: more than 10 samples/, 'the sample limit');
    await sf.waitLog(/\(job big\) refused \(body_size_limit\)/, 'the body limit');
    await waitUntil(() => decodeAll(gw).filter((p) => p.job === 'sglang' && p.name === 'up').length >= 2,
      'two scrapes of the SGLang target at the gateway');
    await waitUntil(() => ['hang', 'limited', 'big', 'node'].every((job) => decodeAll(gw).some((p) => p.job === job)),
      'the refused targets\' up 0 at the gateway');
    // asked as Prometheus asks: its Accept (OpenMetrics first), gzip, the timeout
    const head = hang.requests[0];
    assert.match(head, /^GET \/metrics HTTP\/1\.1\r\n/);
    assert.match(head, /\r\nAccept: application\/openmetrics-text;version=1\.0\.0;q=0\.5,application\/openmetrics-text;version=0\.0\.1;q=0\.4,text\/plain;version=0\.0\.4;q=0\.3,\*\/\*;q=0\.2\r\n/);
    assert.match(head, /\r\nAccept-Encoding: gzip\r\n/);
    assert.match(head, /\r\nX-Prometheus-Scrape-Timeout-Seconds: 1\r\n/);
    const m = await sf.metrics();
    assert.equal(m.must('spanfence_receiver_prometheus_up', { job: 'sglang' }), 1);
    for (const job of ['hang', 'limited', 'big']) assert.equal(m.must('spanfence_receiver_prometheus_up', { job }), 0);
    assert.ok(m.must('otelcol_processor_filter_datapoints_filtered', { processor: 'filter/names' }) >= 1);

    const points = decodeAll(gw);
    // the refused targets: up 0 and nothing else but the scrape_* series
    for (const job of ['hang', 'limited', 'big']) {
      const pts = points.filter((p) => p.job === job);
      assert.ok(pts.length > 0, `nothing for job ${job}`);
      for (const p of pts) assert.match(p.name, /^(up|scrape_duration_seconds|scrape_samples_scraped|scrape_samples_post_metric_relabeling|scrape_series_added)$/);
      for (const p of pts.filter((x) => x.name === 'up')) assert.equal(p.point.asDouble, 0);
      const dur = pts.find((p) => p.name === 'scrape_duration_seconds').point.asDouble;
      if (job === 'hang') assert.ok(dur >= 0.9 && dur < 5, `the hanging scrape took ${dur}s`);
    }

    const scrape = firstScrape(points, 'sglang');
    const res = scrape[0].resource;
    assert.equal(res['service.name'], 'sglang');
    assert.equal(res['service.instance.id'], `127.0.0.1:${ports.SF_EXPOSER_PORT}`);
    assert.equal(res['server.address'], '127.0.0.1');
    assert.equal(res['server.port'], String(ports.SF_EXPOSER_PORT));
    assert.equal(res['url.scheme'], 'http');
    const got = new Map(scrape.map((p) => [key(p.name, p.attrs), p]));
    const take = (name, attrs) => {
      const k = key(name, attrs);
      const p = got.get(k);
      assert.ok(p, `missing ${k}; have ${[...got.keys()].join('\n')}`);
      got.delete(k);
      return p;
    };

    let histograms = 0;
    for (const fam of exposed.families) {
      if (fam.name === 'sglang:num_queue_reqs') {
        assert.ok(!scrape.some((p) => p.name === fam.name), 'the filter let sglang:num_queue_reqs through');
        continue;
      }
      if (fam.type === 'gauge') {
        const s = fam.samples[0];
        const p = take(s.name, fenced(s.labels));
        assert.equal(p.type, 'gauge', s.name);
        assert.ok(same(p.point.asDouble, num(s.value)), `${s.name}: ${p.point.asDouble} != ${s.value}`);
        assert.equal(p.description, fam.help);
      } else if (fam.type === 'counter') {
        const s = fam.samples.find((x) => x.name.endsWith('_total'));
        const created = fam.samples.find((x) => x.name.endsWith('_created'));
        const p = take(s.name, fenced(s.labels));
        assert.equal(p.type, 'sum', s.name);
        assert.equal(p.metric.isMonotonic, true);
        assert.equal(p.metric.aggregationTemporality, 2);
        assert.equal(p.point.asDouble, s.value, s.name);
        // _created is the start time (ns, to the float's precision)
        assert.ok(Math.abs(long(p.point.startTimeUnixNano) / 1e9 - created.value) < 1e-3, `${s.name} start`);
      } else if (fam.type === 'histogram') {
        histograms++;
        const buckets = fam.samples.filter((x) => x.name.endsWith('_bucket'));
        const count = fam.samples.find((x) => x.name.endsWith('_count')).value;
        const sum = fam.samples.find((x) => x.name.endsWith('_sum')).value;
        const labels = { ...buckets[0].labels };
        delete labels.le;
        const p = take(fam.name, fenced(labels));
        assert.equal(p.type, 'histogram', fam.name);
        assert.equal(p.metric.aggregationTemporality, 2);
        const bounds = buckets.filter((b) => b.labels.le !== '+Inf').map((b) => Number(b.labels.le));
        assert.deepEqual(p.point.explicitBounds, bounds, `${fam.name} bounds`);
        const cumulative = buckets.map((b) => b.value);
        const counts = cumulative.map((v, i) => v - (i ? cumulative[i - 1] : 0));
        assert.deepEqual(p.point.bucketCounts.map(long), counts, `${fam.name} bucket counts`);
        assert.equal(long(p.point.count), count);
        assert.equal(p.point.sum, sum);
      } else {
        assert.fail(`the exposer has a ${fam.type}; compare it`);
      }
    }
    assert.equal(histograms, 3);
    // the synthetic series, and nothing else
    const samples = exposed.families.reduce((n, f) => n + f.samples.length, 0);
    assert.equal(take('up', { replica: 'r1' }).point.asDouble, 1);
    assert.equal(take('scrape_samples_scraped', { replica: 'r1' }).point.asDouble, samples);
    assert.equal(take('scrape_samples_post_metric_relabeling', { replica: 'r1' }).point.asDouble, samples);
    assert.equal(take('scrape_series_added', { replica: 'r1' }).point.asDouble, samples);
    assert.ok(take('scrape_duration_seconds', { replica: 'r1' }).point.asDouble < 1);
    assert.deepEqual([...got.keys()], [], 'points the exposer does not have');
    // the fence held: the prompt label is gone, its text nowhere in what left
    for (const p of points) assert.ok(!('prompt' in p.attrs), `${p.name} kept the prompt label`);
    for (const r of gw.of('metrics')) assert.ok(!r.body.includes(Buffer.from('SECRET-PROMPT')), 'the prompt left');
    // the second scrape: the counters kept their start, the series are not new
    const second = points.filter((p) => p.job === 'sglang' && p.time > scrape[0].time);
    assert.equal(second.find((p) => p.name === 'scrape_series_added').point.asDouble, 0);

    // Debian's Prometheus server, scraping the same exposer, reads the same values
    const prom = await startPrometheus(h, ports.SF_EXPOSER_PORT, ports.SF_NODE_PORT);
    let series = [];
    await waitUntil(() => prom.proc.exitCode === null, 'prometheus to run');
    const deadline = Date.now() + 30000;
    for (;;) {
      try {
        series = await prom.query('{job="sglang",__name__=~"sglang:.*"}');
      } catch (_) { series = []; }
      if (series.length > 0 || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(series.length > 0, `prometheus read nothing: ${fs.existsSync(prom.logPath) ? fs.readFileSync(prom.logPath, 'utf8').slice(-2000) : ''}`);
    const ours = new Map();
    for (const p of scrape) {
      const attrs = { ...p.attrs };
      if (p.type === 'histogram') {
        let cum = 0;
        p.point.bucketCounts.forEach((c, i) => {
          cum += long(c);
          const le = i < p.point.explicitBounds.length ? p.point.explicitBounds[i] : '+Inf';
          ours.set(key(`${p.name}_bucket`, { ...attrs, le: String(le) }), cum);
        });
        ours.set(key(`${p.name}_count`, attrs), long(p.point.count));
        ours.set(key(`${p.name}_sum`, attrs), p.point.sum);
        ours.set(key(`${p.name}_created`, attrs), long(p.point.startTimeUnixNano) / 1e9);
      } else {
        ours.set(key(p.name, attrs), p.point.asDouble);
      }
      if (p.type === 'sum') ours.set(key(p.name.replace(/_total$/, '_created'), attrs), long(p.point.startTimeUnixNano) / 1e9);
    }
    let compared = 0;
    for (const s of series) {
      const { __name__: name, job, instance, ...labels } = s.metric;
      assert.equal(job, 'sglang');
      assert.equal(instance, `127.0.0.1:${ports.SF_EXPOSER_PORT}`);
      if (name === 'sglang:num_queue_reqs') continue;   // filtered here
      // the fence keeps the point and removes the prompt label
      if (name === 'sglang:debug_request') assert.equal(labels.prompt, exposed.secret);
      delete labels.prompt;
      // Prometheus writes le as exposed ("1.0"); ours are numbers
      if ('le' in labels && labels.le !== '+Inf') labels.le = String(Number(labels.le));
      const k = key(name, labels);
      assert.ok(ours.has(k), `prometheus has ${k}, spanfence does not`);
      const v = num(s.value[1]);
      const o = ours.get(k);
      if (name.endsWith('_created')) assert.ok(Math.abs(o - v) < 1e-3, `${k}: ${o} != ${v}`);
      else assert.ok(same(o, v), `${k}: spanfence ${o}, prometheus ${v}`);
      compared++;
      ours.delete(k);
    }
    assert.ok(compared >= 90, `compared only ${compared} series with prometheus`);
    // what spanfence has beyond: the synthetic series Prometheus keeps under
    // their own names (not sglang:*)
    assert.deepEqual([...ours.keys()].filter((k) => k.startsWith('sglang:')), [],
      'series spanfence has and prometheus does not');

    // node-exporter: Go's text format 0.0.4. Every family converted to the
    // type its TYPE line says, and the same series as Prometheus read
    const node = firstScrape(points, 'node');
    assert.equal(node.find((p) => p.name === 'up').point.asDouble, 1);
    const otlpType = { counter: 'sum', gauge: 'gauge', summary: 'summary', histogram: 'histogram', untyped: 'gauge' };
    const types = typeLines(nodeText);
    assert.ok(Object.values(types).includes('summary') && Object.values(types).includes('counter'));
    for (const [fam, t] of Object.entries(types)) {
      const p = node.find((x) => x.name === fam);
      assert.ok(p, `node-exporter's ${fam} did not arrive`);
      assert.equal(p.type, otlpType[t], `${fam}: a ${t} arrived as ${p.type}`);
      if (t === 'counter') assert.equal(p.metric.isMonotonic, true, fam);
    }
    let nodeSeries = [];
    for (const end = Date.now() + 30000; nodeSeries.length === 0 && Date.now() < end;) {
      nodeSeries = await prom.query('{job="node",__name__=~"node_.*|go_.*"}').catch(() => []);
      if (nodeSeries.length === 0) await new Promise((r) => setTimeout(r, 200));
    }
    const ourNode = asSamples(node.filter((p) => /^(node_|go_)/.test(p.name)));
    const theirNode = new Set();
    for (const s of nodeSeries) {
      const { __name__: name, job, instance, ...exposedLabels } = s.metric;
      // the fence's keep_keys applies to these series too
      const labels = Object.fromEntries(Object.entries(exposedLabels).filter(([l]) => KEPT.includes(l) || l === 'quantile'));
      const k = key(name, labels);
      theirNode.add(k);
      assert.ok(ourNode.has(k), `prometheus has ${k}, spanfence does not`);
      // values that do not move between two scrapes
      if (/^(node_memory_MemTotal_bytes|node_uname_info|go_info)$/.test(name)) {
        assert.ok(same(ourNode.get(k), num(s.value[1])), `${k}: spanfence ${ourNode.get(k)}, prometheus ${s.value[1]}`);
      }
    }
    assert.ok(theirNode.size > 50, `prometheus read only ${theirNode.size} node series`);
    assert.deepEqual([...ourNode.keys()].filter((k) => !theirNode.has(k)), [],
      'node series spanfence has and prometheus does not');

    // a stop in the middle of the hanging scrape: clean and prompt (exit 0)
    await sf.stop();
  });
});
