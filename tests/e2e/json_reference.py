#!/usr/bin/python3
# tests/e2e/json_reference.py: the reference reading of OTLP/JSON request
# bodies for e2e/decoder_refusals: Debian's python3-protobuf json_format
# with the official OTLP schema (privacy/otlp_schema.py), unknown fields
# ignored as the OTLP specification says. Reads a JSON list of
# {"name", "body"} (body base64) on stdin; writes a JSON list of
# {"name", "ok", "error", "proto"} (proto: base64 of the request serialized
# by the Python runtime, when ok), so the test can send what json_format
# read over OTLP/HTTP protobuf and compare.
#
#   /usr/bin/python3 tests/e2e/json_reference.py <source dir> <scratch dir> < cases.json

import sys
sys.dont_write_bytecode = True     # no __pycache__ in the source tree

import base64                      # noqa: E402
import json                        # noqa: E402
import os                          # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "privacy"))

import otlp_schema                 # noqa: E402
from google.protobuf import json_format  # noqa: E402


def hex_ids(req):
    """OTLP/JSON writes trace and span ids as hex, its one exception to the
    proto3 JSON mapping; json_format, which knows only the schema, reads
    them as base64 (hex digits are base64 digits, so the verdict is the
    same). Turn them back into the bytes the hex names."""
    def fix(m, field):
        b = getattr(m, field)
        if b:
            setattr(m, field, bytes.fromhex(base64.b64encode(b).decode("ascii")))
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                for f in ("trace_id", "span_id", "parent_span_id"):
                    fix(sp, f)
                for ln in sp.links:
                    fix(ln, "trace_id")
                    fix(ln, "span_id")


def main():
    source_dir, scratch = sys.argv[1], sys.argv[2]
    loaded, _ = otlp_schema.load(source_dir, scratch, log=lambda *a: None)
    request = loaded.cls(otlp_schema.REQUEST)
    out = []
    for case in json.load(sys.stdin):
        text = base64.b64decode(case["body"]).decode("utf-8")
        verdict = {"name": case["name"], "ok": False, "error": None, "proto": None}
        try:
            msg = json_format.Parse(text, request(), ignore_unknown_fields=True)
            verdict["ok"] = True
            hex_ids(msg)
            verdict["proto"] = base64.b64encode(msg.SerializeToString()).decode("ascii")
        except Exception as e:     # json_format.ParseError, and what it lets through
            # ascii(): a message can hold a lone surrogate, which print() cannot encode
            verdict["error"] = "%s: %s" % (type(e).__name__, ascii(str(e)))
        out.append(verdict)
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
