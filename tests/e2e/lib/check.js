// tests/e2e/lib/check.js: the allowlist assertions shared by the new e2e
// tests: given the spans the SDK made and the span records that came out of
// spanfence (from any output), every span is there exactly once, carries
// exactly the allowlisted keys with unchanged values, removed keys are
// counted in dropped_attributes_count, status messages are empty, and no
// secret text appears anywhere.
'use strict';

const assert = require('node:assert/strict');
const peers = require('./peers');

const pick = (attrs, keys) => Object.fromEntries(keys.filter((k) => k in attrs).map((k) => [k, attrs[k]]));

const SECRETS = ['secret', '@example.com', 'token=', 'tell me'];

function duplicates(records) {
  const seen = new Map();
  for (const s of records) seen.set(s.spanId, (seen.get(s.spanId) || 0) + 1);
  return [...seen].filter(([, n]) => n > 1).map(([id]) => id);
}

// `sent`: ReadableSpans from the SDK; `got`: span records; `where`: a label
// for messages. Asserts `got` holds exactly the spans of `sent`.
function assertFiltered(sent, got, where) {
  assert.deepEqual(duplicates(got), [], `${where}: spans that arrived more than once`);
  assert.equal(got.length, sent.length, `${where}: span count`);
  const byId = new Map(got.map((s) => [s.spanId, s]));
  for (const s of sent) {
    const id = s.spanContext().spanId;
    const g = byId.get(id);
    assert.ok(g, `${where}: span '${s.name}' (${id}) never arrived`);
    assert.equal(g.traceId, s.spanContext().traceId, `${where}: '${s.name}' trace id`);
    assert.equal(g.name, s.name);
    assert.equal(g.kind, s.kind + 1, `${where}: '${s.name}' kind`);

    const keep = pick(s.attributes, peers.SPAN_ALLOW);
    assert.deepEqual(g.attributes, keep, `${where}: span '${s.name}' attributes`);
    const removed = Object.keys(s.attributes).length - Object.keys(keep).length;
    assert.ok(removed >= 5, `test data: span '${s.name}' has secrets to remove`);
    assert.equal(g.droppedAttributesCount, s.droppedAttributesCount + removed,
      `${where}: span '${s.name}' dropped_attributes_count`);

    assert.equal(g.events.length, s.events.length, `${where}: span '${s.name}' events`);
    s.events.forEach((e, i) => {
      const ge = g.events[i];
      assert.equal(ge.name, e.name);
      const ekeep = pick(e.attributes, peers.EVENT_ALLOW);
      assert.deepEqual(ge.attributes, ekeep, `${where}: span '${s.name}' event '${e.name}' attributes`);
      const eremoved = Object.keys(e.attributes).length - Object.keys(ekeep).length;
      assert.equal(ge.droppedAttributesCount, (e.droppedAttributesCount || 0) + eremoved,
        `${where}: span '${s.name}' event '${e.name}' dropped_attributes_count`);
    });

    assert.equal(g.status.code, s.status.code, `${where}: span '${s.name}' status code`);
    assert.equal(g.status.message, '', `${where}: span '${s.name}' status message`);
    assert.deepEqual(g.resource, s.resource.attributes, `${where}: resource attributes pass unchanged`);
  }
  assert.ok(sent.some((s) => s.status.code === 2 && s.status.message), 'test data has error messages');
  const all = JSON.stringify(got, (k, v) => (typeof v === 'bigint' ? v.toString() : v));
  for (const secret of SECRETS) assert.ok(!all.includes(secret), `${where}: '${secret}' got through`);
}

// Records from two outputs are the same spans, field for field.
function assertSameRecords(a, b, where) {
  const key = (r) => r.spanId;
  const sa = [...a].sort((x, y) => key(x).localeCompare(key(y)));
  const sb = [...b].sort((x, y) => key(x).localeCompare(key(y)));
  const norm = (v) => JSON.parse(JSON.stringify(v, (k, x) => (typeof x === 'bigint' ? `${x}n` : x)));
  assert.deepEqual(norm(sb), norm(sa), where);
}

module.exports = { assertFiltered, assertSameRecords, duplicates, pick, SECRETS };
