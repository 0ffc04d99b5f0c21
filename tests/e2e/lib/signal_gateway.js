// tests/e2e/lib/signal_gateway.js: a stand-in OTLP/HTTP gateway for all three
// signals on 127.0.0.1: POST /v1/traces, /v1/logs, /v1/metrics, gzip or zstd,
// protobuf (or JSON, by content-type), each body decoded by the independent
// decoder (protobufjs code generated from the official protos, shipped in
// @opentelemetry/otlp-transformer 0.214.0: the last release whose generated
// code has logs) into flat records per signal: spans, log records, metric
// data points. It can go down and come back on its port, and answer a
// scripted status.
'use strict';

const http = require('node:http');
const zlib = require('node:zlib');
const deps = require('./deps');
const { Gateway, unzstd } = require('./gateway');
const proto = require('./proto');

const root = deps.load('otlp-transformer-0.214/build/src/generated/root');
const P = root.opentelemetry.proto;
const TYPES = {
  '/v1/traces': ['traces', P.collector.trace.v1.ExportTraceServiceRequest, P.collector.trace.v1.ExportTraceServiceResponse],
  '/v1/logs': ['logs', P.collector.logs.v1.ExportLogsServiceRequest, P.collector.logs.v1.ExportLogsServiceResponse],
  '/v1/metrics': ['metrics', P.collector.metrics.v1.ExportMetricsServiceRequest, P.collector.metrics.v1.ExportMetricsServiceResponse],
};

const { plainAny, plainKvs, hex, u64 } = proto;
const str = (s) => (s == null ? '' : s);
const long = (v) => Number(u64(v, false));

const scopeOf = (s) => (s ? { name: str(s.name), version: str(s.version), attributes: plainKvs(s.attributes) } : null);

function logRecords(req) {
  const out = [];
  for (const rl of req.resourceLogs || []) {
    const resource = plainKvs(rl.resource && rl.resource.attributes);
    for (const sl of rl.scopeLogs || []) {
      for (const l of sl.logRecords || []) {
        out.push({
          resource,
          scope: scopeOf(sl.scope),
          timeUnixNano: long(l.timeUnixNano),
          severityNumber: l.severityNumber || 0,
          severityText: str(l.severityText),
          body: l.body == null ? undefined : plainAny(l.body),
          attributes: plainKvs(l.attributes),
          droppedAttributesCount: l.droppedAttributesCount || 0,
          eventName: str(l.eventName),
          traceId: hex(l.traceId),
          spanId: hex(l.spanId),
        });
      }
    }
  }
  return out;
}

// One record per data point, with its metric's name, description, unit, type.
function metricPoints(req) {
  const out = [];
  for (const rm of req.resourceMetrics || []) {
    const resource = plainKvs(rm.resource && rm.resource.attributes);
    for (const sm of rm.scopeMetrics || []) {
      for (const m of sm.metrics || []) {
        const type = m.data;   // protobufjs' oneof getter: gauge, sum, histogram, ...
        const body = type ? m[type] : null;
        for (const p of (body && body.dataPoints) || []) {
          let value;
          if (type === 'gauge' || type === 'sum') value = p.value === 'asInt' ? long(p.asInt) : p.asDouble;
          else if (type === 'histogram') value = { count: long(p.count), sum: p.sum, bucketCounts: (p.bucketCounts || []).map(long) };
          else value = { count: long(p.count), sum: p.sum };
          out.push({
            resource,
            scope: scopeOf(sm.scope),
            name: str(m.name),
            description: str(m.description),
            unit: str(m.unit),
            metadata: plainKvs(m.metadata),
            type,
            attributes: plainKvs(p.attributes),
            value,
            exemplars: (p.exemplars || []).map((e) => ({
              traceId: hex(e.traceId), spanId: hex(e.spanId), attributes: plainKvs(e.filteredAttributes),
            })),
          });
        }
      }
    }
  }
  return out;
}

function spanRecords(req) {
  const out = [];
  for (const rs of req.resourceSpans || []) {
    const resource = plainKvs(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        out.push({
          resource, scope: scopeOf(ss.scope), traceId: hex(s.traceId), spanId: hex(s.spanId),
          name: str(s.name), attributes: plainKvs(s.attributes), status: s.status ? { code: s.status.code || 0, message: str(s.status.message) } : null,
        });
      }
    }
  }
  return out;
}

const FLATTEN = { traces: spanRecords, logs: logRecords, metrics: metricPoints };

// Decodes one request body of `signal` (protobuf) into flat records.
function decode(signal, body) {
  const [, Req] = TYPES[`/v1/${signal}`];
  return FLATTEN[signal](Req.decode(body));
}

// Gateway's life cycle (start, stop: down and back on its port) and waits,
// with a handler for the three signals.
class SignalGateway extends Gateway {
  constructor(name = 'gateway') {
    super();
    this.name = name;
    this.items = { traces: this.spans, logs: [], metrics: [] };
  }

  get logs() { return this.items.logs; }
  get points() { return this.items.metrics; }

  _handle(req, res) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const t = TYPES[req.url];
      const rec = { method: req.method, path: req.url, signal: t ? t[0] : null, headers: req.headers, status: 0, items: 0, error: null };
      this.requests.push(rec);
      const reply = (status, body, type) => {
        rec.status = status;
        res.writeHead(status, { 'Content-Type': type, 'Content-Length': body.length });
        res.end(body);
        this._wake();
      };
      if (req.method !== 'POST' || !t) return reply(404, Buffer.from('not found'), 'text/plain');
      if (this.status < 200 || this.status > 299) return reply(this.status, Buffer.from('scripted status'), 'text/plain');
      const [signal, Req, Res] = t;
      let body = Buffer.concat(chunks);
      let records;
      const json = (req.headers['content-type'] || '').startsWith('application/json');
      try {
        if (req.headers['content-encoding'] === 'gzip') body = zlib.gunzipSync(body);
        else if (req.headers['content-encoding'] === 'zstd') body = unzstd(body);
        else if (req.headers['content-encoding']) throw new Error(`unexpected content-encoding ${req.headers['content-encoding']}`);
        const msg = json ? Req.fromObject(JSON.parse(body.toString('utf8'))) : Req.decode(body);
        records = FLATTEN[signal](msg);
      } catch (e) {
        rec.error = e.message;
        return reply(400, Buffer.from(e.message), 'text/plain');
      }
      rec.items = records.length;
      if (this.keepBodies) rec.body = body;
      this.items[signal].push(...records);
      return reply(200, Buffer.from(Res.encode(Res.create({})).finish()), json ? 'application/json' : 'application/x-protobuf');
    });
  }

  // Requests of one signal.
  of(signal) {
    return this.requests.filter((r) => r.signal === signal);
  }
}

module.exports = { SignalGateway, decode, logRecords, metricPoints, spanRecords, root };
