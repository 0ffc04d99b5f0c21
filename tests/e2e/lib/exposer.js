// tests/e2e/lib/exposer.js: the real Prometheus exposer of the e2e tests
// (Debian's python3-prometheus-client serving SGLang's metric families:
// tests/e2e/prometheus_exposer.py) on 127.0.0.1:port. Resolves to what it
// holds (its first output line, JSON: families and the planted secret);
// stopped by the harness's cleanup.
'use strict';

const assert = require('node:assert/strict');
const path = require('node:path');
const { spawn } = require('node:child_process');

const { waitUntil } = require('./spanfence');

const PY = '/usr/bin/python3';   // Debian's, with python3-prometheus-client

async function startExposer(h, port) {
  const proc = spawn(PY, [path.join(__dirname, '..', 'prometheus_exposer.py'), String(port)],
    { stdio: ['pipe', 'pipe', 'inherit'] });
  h.onCleanup(() => { proc.stdin.end(); proc.kill(); });
  let out = '';
  proc.stdout.on('data', (c) => { out += c; });
  await waitUntil(() => out.includes('\n') || proc.exitCode !== null, 'the exposer to start', 20000);
  assert.equal(proc.exitCode, null, 'the exposer exited');
  return JSON.parse(out.split('\n')[0]);
}

module.exports = { startExposer };
