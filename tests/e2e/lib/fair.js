// tests/e2e/lib/fair.js: an attacker process beside a well-behaved probe, for
// the fair-share tests (issue 33): the attacker runs until stopped (SIGTERM)
// or its upper bound; the probe makes small exports at a steady pace and
// records each result with the phase it started in.
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

const { sleep } = require('./spanfence');
const flood = require('./flood');

// Spawn `cmd args`; its last stdout line is JSON. stop() sends SIGTERM and
// resolves that JSON (rejects on a non-zero exit).
function attacker(cmd, args, boundS) {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  p.stdout.on('data', (d) => { out += d; });
  p.stderr.on('data', (d) => { err += d; });
  const killer = setTimeout(() => p.kill('SIGKILL'), (boundS + 30) * 1000);
  const done = new Promise((resolve, reject) => {
    p.once('error', reject);
    p.once('exit', (code, sig) => {
      clearTimeout(killer);
      if (code !== 0) {
        reject(new Error(`${args[0]} exited ${code} ${sig || ''}: ${err.slice(-2000)}`));
        return;
      }
      resolve(JSON.parse(out.trim().split('\n').pop()));
    });
  });
  return {
    done,
    running: () => p.exitCode === null && p.signalCode === null,
    async stop() {
      if (p.exitCode === null && p.signalCode === null) p.kill('SIGTERM');
      return done;
    },
  };
}

// Exports of `body` (transport 'grpc' on one connection, or 'http' on a new
// connection each) every `everyMs` until stopped; each call's
// {phase, ok, what} is kept.
function probe(transport, port, body, everyMs, phase, timeoutMs = 5000) {
  const peers = require('./peers');
  const client = transport === 'grpc' ? new peers.RawClient(port) : null;
  const calls = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = Date.now();
      const ph = phase();
      const x = await flood.exportOnce(transport, port, body, client, timeoutMs);
      calls.push({ phase: ph, ...x });
      const left = everyMs - (Date.now() - t0);
      if (left > 0) await sleep(left);
    }
  })();
  return {
    calls,
    async stop() { running = false; await loop; if (client) client.close(); },
  };
}

// The probe's results in `phase`: {n, ok, failures: {what: count}}.
function tally(calls, phase) {
  const of = calls.filter((x) => x.phase === phase);
  const failures = {};
  for (const x of of) if (!x.ok) failures[x.what] = (failures[x.what] || 0) + 1;
  return { n: of.length, ok: of.filter((x) => x.ok).length, failures };
}

// spanfence_receiver_reclaimed_{requests,bytes} of the otlp receiver for a
// transport, summed over reasons.
function reclaimed(m, transport) {
  const l = { receiver: 'otlp', transport };
  return { requests: m.get('spanfence_receiver_reclaimed_requests', l) || 0,
    bytes: m.get('spanfence_receiver_reclaimed_bytes', l) || 0 };
}

// The partial-message flood of e2e/reclaim_grpc and e2e/reclaim_share
// (h2_attack.py partial_hold): `conns` x `streams` calls, each a message
// declaring `declare` bytes of which `send` (inside the stream window) is
// sent, then silence, every call the server ends opened again at once;
// `held` is what it holds when nothing is reclaimed.
const PARTIAL_HOLD = { conns: 40, streams: 16, declare: 4 << 20, send: 240 << 10 };
PARTIAL_HOLD.held = PARTIAL_HOLD.conns * PARTIAL_HOLD.streams * PARTIAL_HOLD.send;

// That flood against the gRPC port `port`, for at most `boundS` seconds.
function partialHold(port, boundS) {
  const f = PARTIAL_HOLD;
  return attacker('/usr/bin/python3', [path.join(__dirname, '..', 'h2_attack.py'), 'partial_hold',
    '--port', String(port), '--conns', String(f.conns), '--streams', String(f.streams),
    '--declare', String(f.declare), '--send', String(f.send), '--seconds', String(boundS)], boundS);
}

module.exports = { attacker, probe, tally, reclaimed, PARTIAL_HOLD, partialHold };
