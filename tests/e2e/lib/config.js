// tests/e2e/lib/config.js: the collector configs of the e2e tests, built
// from objects instead of YAML typed inline in each test. collectorConfig()
// lays out the OpenTelemetry Collector's sections (receivers, processors,
// exporters, extensions, service: telemetry and pipelines), with the
// telemetry address from `metricsPort`; otlpReceiver() and otlphttp() are
// the pieces most tests repeat, allowlist() their transform, envPort() a
// port from the environment, traceControl() and prometheusScrape() the
// engine tests' extension and scrape, engineCollector() their collector. yaml() writes block YAML: mappings and
// lists as blocks, lists of short scalars in flow style ([otlp, batch]),
// strings plain unless YAML would read them as something else (then
// double-quoted, JSON's escapes being YAML's).
'use strict';

const path = require('node:path');

// Strings YAML would not read back as the same string when written plain:
// empty, led by an indicator, padded, with ': ' or ' #', ending in ':', or
// spelling a null, a boolean or a number. In a flow list [a, b] the flow
// indicators ,[]{} must be quoted too.
const PLAIN_UNSAFE = /^$|^[\s\-?:,[\]{}#&*!|>'"%@`]|\s$|: |\s#|:$|[\n\t]/;
const NOT_A_STRING = /^(~|null|true|false|yes|no|on|off|y|n)$|^[-+]?(\d[\d_]*(\.\d*)?|\.\d+)([eE][-+]?\d+)?$|^0x[0-9a-f]+$|^0o[0-7]+$|^[-+]?\.(inf|nan)$/i;
const FLOW_UNSAFE = /[,[\]{}]/;

function scalar(v, flow = false) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  const s = String(v);
  return PLAIN_UNSAFE.test(s) || NOT_A_STRING.test(s) || (flow && FLOW_UNSAFE.test(s))
    ? JSON.stringify(s) : s;
}

const isMap = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isScalar = (v) => !isMap(v) && !Array.isArray(v);

// Block YAML of `value` (a mapping at the top), indented by `depth` steps.
function yaml(value, depth = 0) {
  const pad = '  '.repeat(depth);
  let out = '';
  for (const [k, v] of Object.entries(value)) {
    if (v === undefined) continue;
    if (isMap(v)) {
      out += Object.keys(v).length ? `${pad}${k}:\n${yaml(v, depth + 1)}` : `${pad}${k}: {}\n`;
    } else if (Array.isArray(v) && v.every((x) => isScalar(x) && scalar(x, true) === scalar(x))) {
      out += `${pad}${k}: [${v.map((x) => scalar(x, true)).join(', ')}]\n`;
    } else if (Array.isArray(v)) {
      out += `${pad}${k}:\n`;
      for (const item of v) {
        // "- " then the item's first line; its other lines under it
        const body = isMap(item) ? yaml(item, depth + 2) : `${'  '.repeat(depth + 2)}${scalar(item)}\n`;
        out += `${pad}  - ${body.slice(pad.length + 4)}`;
      }
    } else {
      const s = scalar(v);
      out += s === '' ? `${pad}${k}:\n` : `${pad}${k}: ${s}\n`;
    }
  }
  return out;
}

// The otlp receiver on loopback: grpc and/or http ports, each with extra
// settings merged in (e.g. {grpc: 4317, grpcExtra: {max_recv_msg_size_mib: 1}}).
function otlpReceiver({ grpc, http, grpcExtra = {}, httpExtra = {} }) {
  const protocols = {};
  if (grpc !== undefined) protocols.grpc = { endpoint: `127.0.0.1:${grpc}`, ...grpcExtra };
  if (http !== undefined) protocols.http = { endpoint: `127.0.0.1:${http}`, ...httpExtra };
  return { protocols };
}

// A port the test hands the collector in its environment (SF_<NAME>_PORT),
// as the config reads it: envPort('GRPC') is ${env:SF_GRPC_PORT}.
const envPort = (name) => `\${env:SF_${name}_PORT}`;

// The transform/allowlist most tests run: span attributes gen_ai.request.id
// and gen_ai.usage.prompt_tokens kept and status messages cleared, span
// event attributes bid and batch_size kept; errors propagate. With `keys`
// ({context: [key, ...]}), an allowlist that keeps those keys and does
// nothing else.
function allowlist(keys) {
  if (keys !== undefined) {
    return {
      error_mode: 'propagate',
      trace_statements: Object.entries(keys).map(([context, k]) => ({
        context, statements: [`keep_keys(attributes, [${k.map((x) => JSON.stringify(x)).join(', ')}])`],
      })),
    };
  }
  return {
    error_mode: 'propagate',
    trace_statements: [
      { context: 'span',
        statements: ['keep_keys(attributes, ["gen_ai.request.id", "gen_ai.usage.prompt_tokens"])',
                     'set(status.message, "")'] },
      { context: 'spanevent', statements: ['keep_keys(attributes, ["bid", "batch_size"])'] },
    ],
  };
}

// The trace_control extension of an engine test, its socket and audit log
// in `dir`: levels 0 and 3, resting at 0, windows up to 10 minutes;
// `settings` adds to it or replaces (timeouts, targets, auto_revert).
function traceControl(dir, settings) {
  return {
    socket: path.join(dir, 'tc.sock'),
    audit_log: path.join(dir, 'trace-audit.jsonl'),
    levels: [0, 3],
    resting_level: 0,
    max_window: '10m',
    ...settings,
  };
}

// A prometheus receiver scraping the engine's exposer on loopback `port`
// every second, as job `job`.
function prometheusScrape(port, job = 'sglang') {
  return {
    config: {
      global: { scrape_interval: '1s', scrape_timeout: '1s' },
      scrape_configs: [{ job_name: job, static_configs: [{ targets: [`127.0.0.1:${port}`] }] }],
    },
  };
}

// The collector of the engine tests (capture_truth, latency_guard,
// runbook_screen): spans over gRPC (port `grpc`) to the gateway `gw`;
// trace_control on target r1 (`engine`; `r1` adds to the target's settings,
// `tc` to the extension's), quick to shut down, enforcing nothing, with no
// grace period; with `journal` (the engine's units), the journal in
// dir/journal read, bodies cleared, to debug; with `exposer` (the engine's
// metrics port), its metrics scraped to debug.
function engineCollector({ dir, engine, gw, grpc, metrics, journal = null, exposer = null,
                           r1 = {}, tc = {} }) {
  const receivers = { otlp: otlpReceiver({ grpc }) };
  const pipelines = { traces: { receivers: ['otlp'], exporters: ['otlphttp'] } };
  let processors;
  if (journal !== null) {
    receivers.journald = { directory: path.join(dir, 'journal'), start_at: 'beginning', units: journal };
    processors = {
      'transform/fence': {
        error_mode: 'propagate',
        log_statements: [{ context: 'log', statements: ['set(body, nil)'] }],
      },
    };
    pipelines.logs = { receivers: ['journald'], processors: ['transform/fence'], exporters: ['debug'] };
  }
  if (exposer !== null) {
    receivers['prometheus/sglang'] = prometheusScrape(exposer);
    pipelines.metrics = { receivers: ['prometheus/sglang'], exporters: ['debug'] };
  }
  return collectorConfig({
    receivers,
    processors,
    exporters: { otlphttp: otlphttp(gw.url), debug: null },
    extensions: {
      trace_control: traceControl(dir, {
        shutdown_timeout: '2s', enforce_interval: '0s', grace_period: '0s', ...tc,
        targets: { r1: { endpoint: engine.url, ...r1 } },
      }),
    },
    metricsPort: metrics,
    serviceExtensions: ['trace_control'],
    pipelines,
  });
}

// An otlphttp exporter to `endpoint` (a URL, or a loopback port), without
// compression unless `extra` says otherwise.
function otlphttp(endpoint, extra = {}) {
  const url = typeof endpoint === 'number' ? `http://127.0.0.1:${endpoint}` : endpoint;
  return { endpoint: url, compression: 'none', ...extra };
}

// A whole config. `pipelines`: {id: {receivers, processors, exporters}};
// `telemetry` replaces the default {metrics: {address: 127.0.0.1:metricsPort}}
// (none without a metricsPort). Sections left undefined are not written.
function collectorConfig({ receivers, processors, exporters, extensions, pipelines,
                           metricsPort, telemetry, serviceExtensions }) {
  const service = {
    extensions: serviceExtensions,
    telemetry: telemetry ?? (metricsPort === undefined ? undefined
      : { metrics: { address: `127.0.0.1:${metricsPort}` } }),
    pipelines,
  };
  return yaml({ receivers, processors, exporters, extensions, service });
}

module.exports = {
  yaml, collectorConfig, otlpReceiver, otlphttp, envPort, allowlist, traceControl, prometheusScrape,
  engineCollector,
};
