// tests/e2e/flood_http.test.js: the flood over OTLP/HTTP, then recovery
// (lib/flood.js floodThenRecover): memory_limiter at 64 MiB, the downstream
// down, 1,000 requests of ~555 KB (64 connections, h2load). Peak RSS
// stays within the limit + 32 MiB, every refusal is retryable
// (503 + Retry-After) and counted in spans exactly (received = accepted +
// refused); within 10 s of the downstream returning new data is accepted
// and the backlog delivered; accepted = sent + failed + queued throughout.
'use strict';

const test = require('node:test');
const { floodThenRecover } = require('./lib/flood');

test('http flood at limit 64 MiB with the downstream down: bounded, counted, recovers', async (t) => {
  await floodThenRecover(t, 'http');
});
