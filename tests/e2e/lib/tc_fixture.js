// tests/e2e/lib/tc_fixture.js: a collector with trace_control and one
// stand-in engine, for the trace_control e2e tests: its config (a gRPC
// receiver, a file exporter unless told otherwise, one target r1 and
// optionally r2), started on free ports with the resting level set at start
// waited for and forgotten, and readers for its audit log.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const { Spanfence, freePort, sleep } = require('./spanfence');
const { Engine } = require('./engine');
const { collectorConfig, otlpReceiver, envPort, traceControl } = require('./config');

// opts: grace, extraTarget (an Engine: target r2), match (r1 gets
// match {service.instance.id: r1}), extra (more trace_control settings),
// exporters ({id: settings}; the first is the pipeline's), processors
// ({id: settings}; listed in the pipeline in order), r1 (more settings of
// target r1), grpc (the receiver's port; else SF_GRPC_PORT's).
function tcConfig({ dir, engine, extraTarget = null, grace = '0s', match = false, extra = {},
  exporters = null, processors = null, r1 = {}, grpc = envPort('GRPC') }) {
  const exp = exporters || { file: { path: path.join(dir, 'out.jsonl') } };
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc }) },
    processors: processors || undefined,
    exporters: exp,
    extensions: {
      trace_control: traceControl(dir, {
        audit_log: path.join(dir, 'audit', 'trace-audit.jsonl'),
        shutdown_timeout: '1s',
        retry_on_failure: { initial_interval: '100ms', max_interval: '300ms' },
        enforce_interval: '0s',
        grace_period: grace,
        ...extra,
        targets: {
          r1: { endpoint: engine.url, match: match ? { 'service.instance.id': 'r1' } : undefined, ...r1 },
          r2: extraTarget ? { endpoint: extraTarget.url } : undefined,
        },
      }),
    },
    serviceExtensions: ['trace_control'],
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: {
        receivers: ['otlp'],
        processors: processors ? Object.keys(processors) : undefined,
        exporters: [Object.keys(exp)[0]],
      },
    },
  });
}

// Starts it in h's scratch dir under `name`. opts: tcConfig's, and env,
// grpcPort, wrap (dir => a command line the binary runs under; the audit
// log is then read through /proc/<pid>/root, the collector's mount
// namespace, while it runs).
async function tcSetup(h, name, opts = {}) {
  const engine = new Engine();
  await engine.start();
  h.onCleanup(() => engine.stop());
  const dir = path.join(h.dir, name);
  fs.mkdirSync(path.join(dir, 'audit'), { recursive: true });
  const grpcPort = opts.grpcPort || await freePort();
  const metricsPort = await freePort();
  const sf = h.track(new Spanfence({
    dir: h.dir,
    name,
    wrap: opts.wrap ? opts.wrap(dir) : null,
    config: tcConfig({ dir, engine, ...opts }),
    env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort), ...(opts.env || {}) },
    grpcPort,
    metricsPort,
  }));
  await sf.start();
  // At start the collector sets the engine (at SGLang's default 3) to the
  // resting level: wait for it, then forget it.
  await engine.waitFor(() => engine.levels.length === 1, 'the resting level set at start');
  if (engine.levels[0] !== 0) throw new Error(`the resting level set at start was ${engine.levels[0]}`);
  engine.levels.length = 0;
  const sock = path.join(dir, 'tc.sock');
  const audit = path.join(opts.wrap ? `/proc/${sf.pid}/root` : '/', dir, 'audit', 'trace-audit.jsonl');
  const lines = () => (fs.existsSync(audit) ? fs.readFileSync(audit, 'utf8').split('\n').filter(Boolean) : []);
  // the window records; the resting level set at start ("enforce") apart
  const records = () => lines().map((l) => JSON.parse(l)).filter((r) => r.event !== 'enforce');
  // Resolves the records once pred(records) holds (a bounded wait).
  const waitRecords = async (pred, what, timeoutMs = 60000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const r = records();
      if (pred(r)) return r;
      if (Date.now() > deadline) throw new Error(`timed out waiting for audit records: ${what}\n${lines().join('\n')}`);
      await sleep(100);
    }
  };
  return { engine, dir, sf, sock, audit, lines, records, waitRecords };
}

module.exports = { tcConfig, tcSetup };
