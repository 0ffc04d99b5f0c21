// tests/e2e/lib/grpc_raw.js: one unary gRPC call with raw bytes both ways
// (no schema: the request is built by hand, the answer read as bytes), for
// tests that send OTLP to a method by name.
'use strict';

const deps = require('./deps');

const grpc = deps.grpc();

// Resolves { err, res }: err is grpc-js's status error (code, details) or null.
function rawCall(port, method, body) {
  const client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure());
  return new Promise((resolve) => {
    client.makeUnaryRequest(method, (b) => b, (b) => b, body, (err, res) => {
      client.close();
      resolve({ err, res });
    });
  });
}

module.exports = { rawCall };
