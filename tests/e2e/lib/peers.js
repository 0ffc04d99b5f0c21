// tests/e2e/lib/peers.js: the OTLP senders the e2e tests drive spanfence
// with: the official JS SDK (BasicTracerProvider + BatchSpanProcessor + the
// OTLP/gRPC exporter), recording what it sent and what the collector
// answered, and a raw @grpc/grpc-js client for bytes no SDK would send.
'use strict';

const deps = require('./deps');

const api = deps.api();
const sdk = deps.sdk();
const grpc = deps.grpc();
const { resourceFromAttributes } = deps.resources();
const { OTLPTraceExporter } = deps.grpcExporter();
const { ProtobufTraceSerializer } = deps.transformer();

const EXPORT_METHOD = '/opentelemetry.proto.collector.trace.v1.TraceService/Export';

const SPAN_ALLOW = ['gen_ai.request.id', 'gen_ai.usage.prompt_tokens'];
const EVENT_ALLOW = ['bid', 'batch_size'];

// Wraps a SpanExporter to record every export call's result.
class RecordingExporter {
  constructor(inner) {
    this.inner = inner;
    this.results = [];   // {spans, code, error}
  }

  export(spans, cb) {
    this.inner.export(spans, (res) => {
      this.results.push({ spans: spans.length, code: res.code, error: res.error ? String(res.error.message || res.error) : null });
      cb(res);
    });
  }

  shutdown() { return this.inner.shutdown(); }
  forceFlush() { return this.inner.forceFlush ? this.inner.forceFlush() : Promise.resolve(); }
}

const RESOURCE = {
  'service.name': 'vllm-engine',
  'service.instance.id': 'cvm-7',
  'deployment.environment': 'e2e',
  'host.cpu.count': 2,
};

// Makes `n` LLM-serving-like spans through the SDK and exports them through
// `exporter` in batches of `batchSize`. Every span carries allowlisted and
// secret attributes, events with both, and every third one an error status
// with a secret message. `resource` adds resource attributes. Returns
// {sent: ReadableSpan[], results}.
async function sendSpansThrough(exporter, { n, batchSize = 10, prefix = 'op', resource = {} }) {
  const memory = new sdk.InMemorySpanExporter();
  const rec = new RecordingExporter(exporter);
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes({ ...RESOURCE, ...resource }),
    spanProcessors: [
      new sdk.SimpleSpanProcessor(memory),
      new sdk.BatchSpanProcessor(rec, {
        maxExportBatchSize: batchSize,
        maxQueueSize: Math.max(2048, n),
        scheduledDelayMillis: 20,
        exportTimeoutMillis: 30000,
      }),
    ],
  });
  const tracer = provider.getTracer('spanfence-e2e', '1.0.0');
  for (let i = 0; i < n; i++) {
    const attributes = {
      'gen_ai.request.id': `req-${prefix}-${i}`,
      'gen_ai.prompt': `tell me the secret number ${i}`,
      'user.email': `user${i}@example.com`,
      'http.url': `https://internal.example/v1/chat?token=t${i}`,
      'gen_ai.response.token_ids': [i, i + 1, i + 2],
      'cache.hit': i % 2 === 0,
      'latency.ratio': i + 0.5,
    };
    // The second allowlisted key only on some spans: keep_keys keeps what
    // is present and invents nothing.
    if (i % 3 !== 2) attributes['gen_ai.usage.prompt_tokens'] = 100 + i;
    const span = tracer.startSpan(`${prefix} ${i}`, { kind: api.SpanKind.SERVER, attributes });
    span.addEvent('scheduled', { bid: `b-${i}`, batch_size: 8 + (i % 4), 'prompt.text': `secret prompt ${i}` });
    span.addEvent('finished', { 'finish.reason': 'stop', 'output.text': `secret answer ${i}` });
    if (i % 3 === 0) span.setStatus({ code: api.SpanStatusCode.ERROR, message: `failed for user${i}@example.com` });
    else if (i % 3 === 1) span.setStatus({ code: api.SpanStatusCode.OK });
    span.end();
  }
  await provider.forceFlush();
  const sent = memory.getFinishedSpans().slice();   // shutdown() empties the memory exporter
  await provider.shutdown();
  return { sent, results: rec.results };
}

// The same spans over OTLP/gRPC to 127.0.0.1:port.
async function sendSdkSpans({ port, n, batchSize = 10, prefix = 'op' }) {
  const otlp = new OTLPTraceExporter({ url: `http://127.0.0.1:${port}`, timeoutMillis: 20000 });
  return sendSpansThrough(otlp, { n, batchSize, prefix });
}

// Makes `n` spans with the SDK (not exported) and returns them serialized by
// the official serializer, plus their span ids.
function serializedSpans(n, prefix = 'raw') {
  const memory = new sdk.InMemorySpanExporter();
  const provider = new sdk.BasicTracerProvider({
    resource: resourceFromAttributes(RESOURCE),
    spanProcessors: [new sdk.SimpleSpanProcessor(memory)],
  });
  const tracer = provider.getTracer('spanfence-e2e-raw', '1.0.0');
  for (let i = 0; i < n; i++) {
    const span = tracer.startSpan(`${prefix} ${i}`, {
      attributes: { 'gen_ai.request.id': `${prefix}-${i}`, 'gen_ai.prompt': 'secret' },
    });
    span.end();
  }
  const spans = memory.getFinishedSpans();
  return {
    bytes: Buffer.from(ProtobufTraceSerializer.serializeRequest(spans)),
    spanIds: spans.map((s) => s.spanContext().spanId),
  };
}

// A bare gRPC client: sends bytes as they are to any method.
class RawClient {
  constructor(port) {
    this.client = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      'grpc.max_send_message_length': -1,
      'grpc.max_receive_message_length': -1,
    });
  }

  // Resolves {code, details, response}; code 0 is OK. timeoutMs bounds a
  // call that would otherwise hang (it then ends DEADLINE_EXCEEDED, code 4).
  call(bytes, { method = EXPORT_METHOD, timeoutMs = 20000 } = {}) {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(method, (b) => b, (b) => b, bytes, new grpc.Metadata(),
        { deadline: Date.now() + timeoutMs }, (err, response) => {
          if (err) resolve({ code: err.code, details: err.details, response: null });
          else resolve({ code: 0, details: '', response });
        });
    });
  }

  close() {
    this.client.close();
  }
}

module.exports = {
  api, sdk, grpc, SPAN_ALLOW, EVENT_ALLOW, RESOURCE, EXPORT_METHOD,
  RecordingExporter, sendSpansThrough, sendSdkSpans, serializedSpans, RawClient, status: grpc.status,
};
