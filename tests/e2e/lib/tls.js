// tests/e2e/lib/tls.js: a private PKI made with openssl for a test, and TLS
// OTLP gateways on 127.0.0.1 that record what each connection showed them:
// the SNI name, the Host header (HTTP) or :authority (gRPC), the client
// certificate. Shared by the otlphttp and otlp exporters' TLS tests.
'use strict';

const fs = require('node:fs');
const http2 = require('node:http2');
const https = require('node:https');
const path = require('node:path');
const zlib = require('node:zlib');
const { execFileSync } = require('node:child_process');

const proto = require('./proto');

function openssl(dir, args) {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

// ca.pem (+ ca.key); server.pem/key for localhost and 127.0.0.1;
// internal.pem/key valid only for DNS:gateway.internal (a gateway behind a
// name the VM cannot resolve); client.pem/key (clientAuth); other-ca.pem,
// an unrelated CA.
function makePki(dir) {
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=spanfence test CA']);
  openssl(dir, ['req', '-x509', ...ec, '-keyout', 'other-ca.key', '-out', 'other-ca.pem', '-days', '2', '-subj', '/CN=another CA']);
  fs.writeFileSync(path.join(dir, 'server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  fs.writeFileSync(path.join(dir, 'internal.ext'), 'subjectAltName=DNS:gateway.internal\nextendedKeyUsage=serverAuth\n');
  fs.writeFileSync(path.join(dir, 'client.ext'), 'extendedKeyUsage=clientAuth\n');
  for (const [name, cn] of [['server', 'localhost'], ['internal', 'gateway.internal'], ['client', 'spanfence-exporter']]) {
    openssl(dir, ['req', ...ec, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${cn}`]);
    openssl(dir, ['x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', `${name}.pem`, '-days', '2', '-extfile', `${name}.ext`]);
  }
  const f = (n) => path.join(dir, n);
  return { ca: f('ca.pem'), otherCa: f('other-ca.pem'), cert: f('server.pem'), key: f('server.key'),
    internalCert: f('internal.pem'), internalKey: f('internal.key'),
    clientCert: f('client.pem'), clientKey: f('client.key') };
}

// An HTTPS OTLP gateway: counts /v1/traces requests and records the client
// certificates, SNI names and Host headers it saw; answers an empty
// ExportTraceServiceResponse. `cert`/`key` default to the localhost pair.
async function tlsGateway(pki, { mtls = false, maxVersion, cert = pki.cert, key = pki.key } = {}) {
  const g = { requests: 0, peers: [], sni: [], hosts: [], server: null, port: 0 };
  g.server = https.createServer({
    key: fs.readFileSync(key), cert: fs.readFileSync(cert), ca: fs.readFileSync(pki.ca),
    requestCert: mtls, rejectUnauthorized: mtls, ...(maxVersion ? { maxVersion } : {}),
  }, (req, res) => {
    req.on('data', () => {});
    req.on('end', () => {
      if (req.url === '/v1/traces') g.requests++;
      g.sni.push(req.socket.servername);
      g.hosts.push(req.headers.host);
      const pc = req.socket.getPeerCertificate();
      if (pc && pc.subject) g.peers.push({ cn: pc.subject.CN, issuer: pc.issuer.CN, authorized: req.socket.authorized });
      res.writeHead(200, { 'Content-Type': 'application/x-protobuf' });
      res.end();
    });
  });
  await new Promise((r) => g.server.listen(0, '127.0.0.1', r));
  g.port = g.server.address().port;
  return g;
}

// An OTLP/gRPC gateway over TLS, on node's own HTTP/2 server (so the SNI
// name and :authority of every call can be seen, which grpc-js hides):
// decodes each TraceService/Export message (gzip or not) with the
// independent decoder, counts its spans, answers an empty response with
// grpc-status 0.
async function tlsGrpcGateway(pki, { cert = pki.cert, key = pki.key } = {}) {
  const g = { calls: 0, spans: 0, sni: [], authorities: [], server: null, port: 0 };
  g.server = http2.createSecureServer({ key: fs.readFileSync(key), cert: fs.readFileSync(cert) });
  g.server.on('stream', (stream, headers) => {
    const chunks = [];
    stream.on('data', (c) => chunks.push(c));
    stream.on('end', () => {
      const body = Buffer.concat(chunks);
      g.sni.push(stream.session.socket.servername);
      g.authorities.push(headers[':authority']);
      if (headers[':path'] === '/opentelemetry.proto.collector.trace.v1.TraceService/Export' && body.length >= 5) {
        const msg = body.subarray(5, 5 + body.readUInt32BE(1));
        const req = proto.decodeRequest(body[0] === 1 ? zlib.gunzipSync(msg) : msg);
        g.calls++;
        for (const rs of req.resourceSpans) for (const ss of rs.scopeSpans) g.spans += ss.spans.length;
      }
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
      stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
      stream.end(Buffer.from([0, 0, 0, 0, 0]));
    });
    stream.on('error', () => {});
  });
  g.server.on('sessionError', () => {});
  await new Promise((r) => g.server.listen(0, '127.0.0.1', r));
  g.port = g.server.address().port;
  return g;
}

module.exports = { makePki, tlsGateway, tlsGrpcGateway };
