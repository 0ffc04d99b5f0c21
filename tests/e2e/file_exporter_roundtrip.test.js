// tests/e2e/file_exporter_roundtrip.test.js: the `file` exporter in both
// formats (OTLP/JSON lines and length-prefixed protobuf), gzip-compressed and
// rotated by max_lines, fed by the JS SDK over OTLP/gRPC. Every segment
// (rotated backups and the live file) is read back with node's zlib and the
// independent decoder: each is a complete gzip stream holding whole records,
// backups hold exactly max_lines records, and together they hold every span
// exactly once with only the allowlisted keys.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const zlib = require('node:zlib');

const { Spanfence, harness, freePort } = require('./lib/spanfence');
const { collectorConfig, otlpReceiver, envPort, allowlist } = require('./lib/config');
const senders = require('./lib/senders');
const check = require('./lib/check');

const N = 40;
const BATCH = 4;
const FORMATS = {
  json: { maxLines: 3, read: (buf) => senders.jsonLinesRecords(buf.toString('utf8')) },
  proto: { maxLines: 4, read: (buf) => senders.protoFileRecords(buf) },
};

function config(dirs) {
  const exporters = Object.fromEntries(Object.entries(FORMATS).map(([format, f]) => [`file/${format}`, {
    path: path.join(dirs[format], 'spans.gz'),
    format,
    compression: 'gzip',
    flush_interval: '50ms',
    max_lines: f.maxLines,
    rotation: { max_megabytes: 64, max_backups: 0 },
  }]));
  return collectorConfig({
    receivers: { otlp: otlpReceiver({ grpc: envPort('GRPC') }) },
    processors: { 'transform/allowlist': allowlist() },
    exporters,
    metricsPort: envPort('METRICS'),
    pipelines: {
      traces: { receivers: ['otlp'], processors: ['transform/allowlist'], exporters: Object.keys(exporters) },
    },
  });
}

const BACKUP = /^spans-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d\.\d{3}\.gz$/;

test('file exporter: json and proto, gzip, rotated by max_lines: every span once across all segments', async () => {
  await harness('file_exporter_roundtrip', async (h) => {
    const dirs = {};
    for (const f of Object.keys(FORMATS)) {
      dirs[f] = path.join(h.dir, f);
      fs.mkdirSync(dirs[f]);
    }
    const grpcPort = await freePort();
    const metricsPort = await freePort();
    const sf = h.track(new Spanfence({
      dir: h.dir,
      config: config(dirs),
      env: { SF_GRPC_PORT: String(grpcPort), SF_METRICS_PORT: String(metricsPort) },
      grpcPort,
      metricsPort,
    }));
    await sf.start();

    const exporter = senders.makeExporter('grpc', { grpcPort, compression: 'gzip' });
    const { sent, results } = await senders.sendSpans(exporter, { n: N, batchSize: BATCH, prefix: 'file' });
    assert.deepEqual(results.filter((r) => r.code !== 0), [], 'every SDK export call succeeds');
    const requests = results.length;
    assert.ok(requests >= N / BATCH, `${requests} export calls`);

    const m = await sf.waitMetrics((x) => Object.keys(FORMATS).every((f) => x.get('otelcol_exporter_sent_spans', { exporter: `file/${f}` }) === N),
      `both file exporters sent ${N}`);
    assert.equal(m.must('otelcol_receiver_accepted_spans', { receiver: 'otlp', transport: 'grpc' }), N);
    for (const f of Object.keys(FORMATS)) {
      assert.equal(m.must('otelcol_exporter_send_failed_spans', { exporter: `file/${f}` }), 0);
      assert.equal(m.must('spanfence_exporter_queued_spans', { exporter: `file/${f}` }), 0);
    }
    await sf.stop();   // ends the live gzip member

    const byFormat = {};
    for (const [format, f] of Object.entries(FORMATS)) {
      const names = fs.readdirSync(dirs[format]).sort();
      assert.ok(names.includes('spans.gz'), `${format}: live file missing; have ${names}`);
      const backups = names.filter((n) => n !== 'spans.gz');
      for (const b of backups) assert.match(b, BACKUP, `${format}: unexpected file`);
      // One request per line/record; rotation after every max_lines of them.
      assert.equal(backups.length, Math.ceil(requests / f.maxLines) - 1,
        `${format}: ${requests} requests at ${f.maxLines} per file: backups ${backups}`);

      const all = [];
      let lines = 0;
      for (const name of [...backups, 'spans.gz']) {   // oldest first, the live file last
        const gz = fs.readFileSync(path.join(dirs[format], name));
        assert.deepEqual([...gz.subarray(0, 2)], [0x1f, 0x8b], `${format}/${name}: not gzip`);
        let raw;
        assert.doesNotThrow(() => { raw = zlib.gunzipSync(gz); }, `${format}/${name}: not a complete gzip stream`);
        const seg = f.read(raw);
        if (name === 'spans.gz') {
          assert.ok(seg.lines >= 1 && seg.lines <= f.maxLines, `${format}: live file holds ${seg.lines} records`);
        } else {
          assert.equal(seg.lines, f.maxLines, `${format}/${name}: records in a rotated file`);
        }
        lines += seg.lines;
        all.push(...seg.records);
      }
      assert.equal(lines, requests, `${format}: one record per export request`);
      check.assertFiltered(sent, all, `file/${format}`);
      byFormat[format] = all;
    }
    check.assertSameRecords(byFormat.json, byFormat.proto, 'json and proto files hold the same spans');
  });
});
