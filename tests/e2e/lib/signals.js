// tests/e2e/lib/signals.js: the official OpenTelemetry JS SDK's log and metric
// exporters for the three OTLP transports (gRPC, HTTP/protobuf, HTTP/JSON),
// and what they send: an SGLang engine's app logs (its scheduler's statistics
// lines, errors quoting a request, planted secrets in every string field) and
// its metrics (the sglang:* gauges, counters and histograms with SGLang's
// labels, plus series no policy should let out). Each sender returns what the
// SDK made, flattened the way lib/signal_gateway.js flattens what arrives.
'use strict';

const deps = require('./deps');

const { resourceFromAttributes } = deps.resources();
const sdkLogs = deps.load('@opentelemetry/sdk-logs');
const sdkMetrics = deps.load('@opentelemetry/sdk-metrics');
const { SeverityNumber } = deps.load('@opentelemetry/api-logs');

const PROTOCOLS = ['grpc', 'http-protobuf', 'http-json'];

const EXPORTERS = {
  logs: {
    grpc: ['@opentelemetry/exporter-logs-otlp-grpc', 'OTLPLogExporter'],
    'http-protobuf': ['@opentelemetry/exporter-logs-otlp-proto', 'OTLPLogExporter'],
    'http-json': ['@opentelemetry/exporter-logs-otlp-http', 'OTLPLogExporter'],
  },
  metrics: {
    grpc: ['@opentelemetry/exporter-metrics-otlp-grpc', 'OTLPMetricExporter'],
    'http-protobuf': ['@opentelemetry/exporter-metrics-otlp-proto', 'OTLPMetricExporter'],
    'http-json': ['@opentelemetry/exporter-metrics-otlp-http', 'OTLPMetricExporter'],
  },
};

// An SDK exporter of `signal` ('logs' or 'metrics') for `protocol` aimed at
// 127.0.0.1 (grpcPort for gRPC, httpPort for both HTTP ones).
function makeExporter(signal, protocol, { grpcPort, httpPort, compression = 'none' }) {
  const [pkg, cls] = EXPORTERS[signal][protocol];
  const url = protocol === 'grpc' ? `http://127.0.0.1:${grpcPort}` : `http://127.0.0.1:${httpPort}/v1/${signal}`;
  return new (deps.load(pkg)[cls])({ url, compression, timeoutMillis: 20000 });
}

// Wraps an exporter to record each export call's outcome.
class Recording {
  constructor(inner) {
    this.inner = inner;
    this.results = [];   // {items, code, error}
  }

  exportWith(items, count) {
    return new Promise((resolve) => {
      this.inner.export(items, (res) => {
        const r = { items: count, code: res.code, error: res.error ? String(res.error.message || res.error) : null };
        this.results.push(r);
        resolve(r);
      });
    });
  }
}

// ---- app logs ---------------------------------------------------------------

const ENGINE_RESOURCE = {
  'service.name': 'sglang',
  'host.name': 'cvm-host-secret-7',
  'process.command_line': 'python -m sglang.launch_server --api-key SECRET-KEY',
};

// The log attributes the seed fence keeps, with legitimate values.
const LOG_KEEP = ['code.function', 'code.lineno', 'log.logger'];

// Body shapes the seed fence lets out: SGLang's scheduler statistics as it
// prints them (scheduler_metrics_mixin.py log_prefill_stats /
// log_decode_stats: every field ends with ", ").
function prefillLine(i) {
  return `Prefill batch, #new-seq: ${1 + (i % 3)}, #new-token: ${7 * i + 3}, #cached-token: ${i * 2}, ` +
    `token usage: 0.${String(i % 100).padStart(2, '0')}, #running-req: ${i % 5}, #queue-req: ${i % 2}, `;
}
function decodeLine(i) {
  return `Decode batch, #running-req: ${1 + (i % 4)}, #token: ${100 + i}, token usage: 0.0${i % 10}, ` +
    `cuda graph: ${i % 3 ? 'True' : 'False'}, gen throughput (token/s): ${(40 + i / 10).toFixed(2)}, #queue-req: 0, `;
}

// One log record description per i: kind 'stats' (body kept) or 'error'
// (an error quoting the request: body and every secret must not leave).
function appLog(i, prefix) {
  const stats = i % 3 !== 2;
  const rec = {
    kind: stats ? 'stats' : 'error',
    severityNumber: stats ? SeverityNumber.INFO : SeverityNumber.ERROR,
    severityText: stats ? 'INFO' : 'ERROR',
    body: stats ? (i % 2 === 0 ? prefillLine(i) : decodeLine(i))
      : `Error in request ${prefix}-${i}: prompt 'tell me the secret number ${i}' from user${i}@example.com`,
    attributes: {
      'log.logger': 'sglang.srt.managers.scheduler',
      'code.function': stats ? 'log_prefill_stats' : 'handle_generate_request',
      'code.lineno': 1200 + i,
      'request.prompt': `tell me the secret number ${i}`,
      'user.email': `user${i}@example.com`,
      'http.url': `https://internal.example/v1/chat?token=t${i}`,
      'e2e.seq': `${prefix}-${i}`,   // not kept: the test finds records by body/lineno
    },
  };
  // every fourth record plants text in the fields a naive fence forgets
  if (i % 4 === 3) {
    rec.severityText = 'secret severity tell me';
    rec.eventName = 'gen_ai.secret.event tell me';
  }
  return rec;
}

// Emits `n` app log records through the SDK (LoggerProvider, a batch
// processor on `exporter`), in batches of `batchSize`. Returns {sent, results}:
// sent are the record descriptions above in emit order.
async function sendLogs(exporter, { n, batchSize = 10, prefix = 'log', resource = {} }) {
  const memory = new sdkLogs.InMemoryLogRecordExporter();
  const rec = new Recording(exporter);
  const batch = {
    export: (records, cb) => rec.exportWith(records, records.length).then((r) => cb({ code: r.code, error: r.error })),
    shutdown: () => Promise.resolve(),
    forceFlush: () => Promise.resolve(),
  };
  const provider = new sdkLogs.LoggerProvider({
    resource: resourceFromAttributes({ ...ENGINE_RESOURCE, ...resource }),
    processors: [
      new sdkLogs.SimpleLogRecordProcessor(memory),
      new sdkLogs.BatchLogRecordProcessor(batch, {
        maxExportBatchSize: batchSize, maxQueueSize: Math.max(2048, n), scheduledDelayMillis: 20, exportTimeoutMillis: 30000,
      }),
    ],
  });
  const logger = provider.getLogger('sglang.srt.managers.scheduler', '0.4.6');
  const sent = [];
  for (let i = 0; i < n; i++) {
    const r = appLog(i, prefix);
    sent.push(r);
    logger.emit({
      severityNumber: r.severityNumber, severityText: r.severityText, body: r.body,
      attributes: r.attributes, ...(r.eventName ? { eventName: r.eventName } : {}),
    });
  }
  await provider.forceFlush();
  await provider.shutdown();
  return { sent, results: rec.results };
}

// ---- engine metrics ---------------------------------------------------------

// SGLang's labels (sglang/srt/metrics/collector.py), as the engine sets them.
const METRIC_LABELS = { model_name: 'meta-llama/Llama-3.1-8B-Instruct', engine_type: 'unified', tp_rank: '0', pp_rank: '0' };
const DATAPOINT_KEEP = Object.keys(METRIC_LABELS);

// The series of one scrape: [type, name, unit, value(s)]. Names and units as
// SGLang's Prometheus collector writes them; hostile ones after them.
function sglangSeries(k) {
  return [
    ['gauge', 'sglang:num_running_reqs', '{request}', 3 + k],
    ['gauge', 'sglang:num_queue_reqs', '{request}', k],
    ['gauge', 'sglang:num_used_tokens', '{token}', 4096 + k],
    ['gauge', 'sglang:token_usage', '1', 0.25],
    ['gauge', 'sglang:gen_throughput', '{token}/s', 812.5],
    ['gauge', 'sglang:cache_hit_rate', '1', 0.4],
    ['counter', 'sglang:prompt_tokens_total', '{token}', 5120 + k],
    ['counter', 'sglang:generation_tokens_total', '{token}', 640 + k],
    ['counter', 'sglang:num_requests_total', '{request}', 10 + k],
    ['histogram', 'sglang:time_to_first_token_seconds', 's', [0.031, 0.045, 0.2, 1.5]],
    ['histogram', 'sglang:e2e_request_latency_seconds', 's', [0.45, 0.9, 3.2]],
    ['histogram', 'sglang:inter_token_latency_seconds', 's', [0.006, 0.007, 0.011]],
  ];
}
// SGLang's bucket bounds (TokenizerMetricsCollector): the fence pins them.
const TTFT_BOUNDS = [0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400];
const SGLANG_BOUNDS = {
  'sglang:time_to_first_token_seconds': TTFT_BOUNDS,
  'sglang:e2e_request_latency_seconds': [...TTFT_BOUNDS, 600, 1200, 1800, 2400],
  'sglang:inter_token_latency_seconds': [0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030,
    0.035, 0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000],
};
const HOSTILE_SERIES = [
  // a name that is free text, a description and unit quoting a request
  ['gauge', 'prompt tell me the secret', 'secret unit', 1],
  ['counter', 'sglang:num_aborted_requests', 'secret-unit-tell-me', 2],
];

// Records `scrapes` rounds of SGLang's metrics through the SDK and exports
// each round's collection through `exporter` (one export call per round).
// Datapoint attributes: SGLang's labels plus secrets. Returns {sent, results}
// where sent is [{name, description, unit, type, points: [{attributes, value}]}]
// of the LAST round (cumulative: every round carries every series).
async function sendMetrics(exporter, { scrapes = 2, resource = {}, prefix = 'm' }) {
  const rec = new Recording(exporter);
  class Reader extends sdkMetrics.MetricReader {
    onShutdown() { return Promise.resolve(); }
    onForceFlush() { return Promise.resolve(); }
  }
  const reader = new Reader();
  const provider = new sdkMetrics.MeterProvider({
    resource: resourceFromAttributes({ ...ENGINE_RESOURCE, ...resource }),
    readers: [reader],
  });
  const meter = provider.getMeter('sglang', '0.4.6');
  const labels = { ...METRIC_LABELS, 'request.prompt': `tell me the secret ${prefix}`, 'user.email': `${prefix}@example.com` };
  const series = [...sglangSeries(0), ...HOSTILE_SERIES];
  const instruments = series.map(([type, name, unit]) => {
    const opts = { unit, description: `${name} as SGLang describes it, with secret text tell me` };
    if (type === 'gauge') return meter.createGauge(name, opts);
    if (type === 'counter') return meter.createCounter(name, opts);
    return meter.createHistogram(name, { ...opts, advice: { explicitBucketBoundaries: SGLANG_BOUNDS[name] || [0.01, 0.05, 0.1, 0.5, 1, 5] } });
  });
  let last = null;
  for (let k = 0; k < scrapes; k++) {
    const round = [...sglangSeries(k), ...HOSTILE_SERIES];
    round.forEach(([type, , , v], idx) => {
      const inst = instruments[idx];
      if (type === 'gauge') inst.record(v, labels);
      else if (type === 'counter') inst.add(k === 0 ? v : 1, labels);
      else for (const x of v) inst.record(x, labels);
    });
    const { resourceMetrics, errors } = await reader.collect();
    if (errors.length) throw new Error(`metric collection: ${errors.join('; ')}`);
    const n = countPoints(resourceMetrics);
    await rec.exportWith(resourceMetrics, n);
    last = resourceMetrics;
  }
  await provider.shutdown();
  return { sent: flattenSdkMetrics(last), results: rec.results };
}

function countPoints(resourceMetrics) {
  let n = 0;
  for (const sm of resourceMetrics.scopeMetrics) for (const m of sm.metrics) n += m.dataPoints.length;
  return n;
}

function flattenSdkMetrics(resourceMetrics) {
  const out = [];
  for (const sm of resourceMetrics.scopeMetrics) {
    for (const m of sm.metrics) {
      out.push({
        name: m.descriptor.name,
        description: m.descriptor.description,
        unit: m.descriptor.unit,
        points: m.dataPoints.map((p) => ({
          attributes: { ...p.attributes },
          value: typeof p.value === 'number' ? p.value : { count: p.value.count, sum: p.value.sum },
        })),
      });
    }
  }
  return out;
}

module.exports = {
  PROTOCOLS, makeExporter, sendLogs, sendMetrics, appLog, prefillLine, decodeLine,
  ENGINE_RESOURCE, LOG_KEEP, METRIC_LABELS, DATAPOINT_KEEP, HOSTILE_SERIES, sglangSeries,
};
