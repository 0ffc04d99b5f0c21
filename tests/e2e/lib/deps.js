// tests/e2e/lib/deps.js: the one place the e2e tests load their npm peers
// and the paths the build hands them. A missing node_modules or binary is a
// FAILURE with a message saying what to run, never a silent skip.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

const E2E_DIR = path.resolve(__dirname, '..');

function fail(msg) {
  process.stderr.write(`e2e: ${msg}\n`);
  process.exit(1);
}

if (!fs.existsSync(path.join(E2E_DIR, 'node_modules'))) {
  fail(`node_modules is missing in ${E2E_DIR}: run \`npm ci\` there ` +
       '(tools/setup.sh does it); the e2e tests cannot run without their OTLP peers');
}

function load(name) {
  try {
    return require(require.resolve(name, { paths: [E2E_DIR] }));
  } catch (e) {
    return fail(`cannot load npm package '${name}' (${e.message}): run \`npm ci\` in ${E2E_DIR}`);
  }
}

// The official OTLP protos as generated protobufjs code, shipped inside the
// OpenTelemetry JS exporter's transformer: our independent decoder.
const root = load('@opentelemetry/otlp-transformer/build/src/generated/root');

// Throws (failing the test that needs it) rather than exiting, so the
// tests that do not need this binary still run and report.
function binary(envName, what) {
  const p = process.env[envName];
  if (!p) throw new Error(`e2e: ${envName} is not set: run the e2e tests through ctest (it points ${envName} at ${what})`);
  if (!fs.existsSync(p)) throw new Error(`e2e: ${envName}=${p} does not exist: build the project first`);
  return p;
}

// A fresh scratch directory for this test, under the build tree when ctest runs us.
function tmpDir(name) {
  const base = process.env.SF_E2E_TMP || path.join(E2E_DIR, '.tmp', name);
  fs.rmSync(base, { recursive: true, force: true });
  fs.mkdirSync(base, { recursive: true });
  return base;
}

module.exports = {
  E2E_DIR,
  load,
  fail,
  root,
  api: () => load('@opentelemetry/api'),
  sdk: () => load('@opentelemetry/sdk-trace-base'),
  resources: () => load('@opentelemetry/resources'),
  transformer: () => load('@opentelemetry/otlp-transformer'),
  grpcExporter: () => load('@opentelemetry/exporter-trace-otlp-grpc'),
  grpc: () => load('@grpc/grpc-js'),
  spanfenceBin: () => binary('SPANFENCE_BIN', 'the built spanfence binary'),
  codecBin: () => binary('OTLP_CODEC_BIN', 'the built otlp_codec tool'),
  sendBin: () => binary('SF_SEND_BIN', 'the built sf_send tool'),
  sinkBin: () => binary('SF_SINK_BIN', 'the built sf_sink benchmark destination'),
  tmpDir,
};
