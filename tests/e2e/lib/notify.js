// tests/e2e/lib/notify.js: a stand-in for systemd's notify socket (a
// python3 unix datagram socket), for the sd_notify tests: every datagram
// the collector sends, in order, and a bounded wait for one.
'use strict';

const fs = require('node:fs');
const path = require('node:path');

// A stand-in for systemd's notify socket: every datagram as one JSON line.
function notifySocket(h, sockPath) {
  const { spawn } = require('node:child_process');
  const py = spawn('python3', ['-u', '-c', `
import json, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
print(json.dumps({"bound": True}), flush=True)
while True:
    print(json.dumps({"msg": s.recv(65536).decode()}), flush=True)
`, sockPath], { stdio: ['ignore', 'pipe', 'inherit'] });
  h.onCleanup(() => py.kill());
  const st = { msgs: [], listeners: [], bound: null };
  st.bound = new Promise((resolve) => {
    let buf = '';
    py.stdout.on('data', (d) => {
      buf += d;
      let nl;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const o = JSON.parse(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        if (o.bound) { resolve(); continue; }
        st.msgs.push(o.msg);
        for (const f of st.listeners.slice()) f(o.msg);
      }
    });
  });
  st.waitFor = (pred, what, timeoutMs = 30000) => new Promise((resolve, reject) => {
    const found = st.msgs.find(pred);
    if (found) return resolve(found);
    const timer = setTimeout(() => reject(new Error(`no notify message: ${what}; got ${JSON.stringify(st.msgs)}`)), timeoutMs);
    const f = (m) => {
      if (!pred(m)) return;
      clearTimeout(timer);
      st.listeners = st.listeners.filter((x) => x !== f);
      resolve(m);
    };
    st.listeners.push(f);
  });
  return st;
}

// A fresh stand-in at h.dir/<name>, bound: the socket's path is n.path.
async function notifyOn(h, name) {
  const sockPath = path.join(h.dir, name);
  try { fs.unlinkSync(sockPath); } catch (_) { /* none */ }
  const n = notifySocket(h, sockPath);
  await n.bound;
  n.path = sockPath;
  return n;
}

module.exports = { notifySocket, notifyOn };
