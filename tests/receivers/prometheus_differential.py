#!/usr/bin/env python3
"""tests/receivers/prometheus_differential.py: the prometheus receiver's
exposition parser (through tools/prom_dump) against prometheus_client's
parsers (Debian's python3-prometheus-client): parser.text_string_to_metric_families
for the text format, openmetrics.parser for OpenMetrics, on a corpus that
includes hostile text (escapes, NaN/Inf, duplicate series, exemplars, huge
lines, no newline at the end, over-limit counts, broken UTF-8).

For every case both parsers run; they must agree on accepting or refusing,
and when both accept, on every series (name, labels, value, timestamp), the
type of its family and the family's help. Where they differ on purpose the
case says so (DIFFER: why), and a declared difference that stops happening
fails too, so the list stays true. prometheus_client's text parser is lax
by its own account ("a laxer parser than the main Go parser"): most declared
differences are text it accepts that Prometheus itself refuses.

  prometheus_differential.py --dump build/prom_dump
"""
import argparse
import json
import math
import subprocess
import sys
import tempfile

from prometheus_client.openmetrics import parser as om_parser
from prometheus_client import parser as text_parser

TEXT, OM = "text", "om"
SAMPLE_LIMIT = 5000
LABEL_LIMIT = 64
MAX_LINE = 65536

PY_LAX = "prometheus_client's text parser accepts it; Prometheus and spanfence refuse it"

# (name, format, body, None | "DIFFER: why")
CASES = [
    ("basic", TEXT, b"# HELP a_total Requests.\n# TYPE a_total counter\n"
     b"a_total{method=\"post\",code=\"200\"} 1027 1395066363000\n"
     b"a_total{method=\"post\",code=\"400\"} 3 1395066363000\n", None),
    ("gauge_untyped", TEXT, b"# TYPE g gauge\ng 1.5\nuntyped_x{a=\"b\"} -2e-3\n", None),
    ("escapes", TEXT, b"x{path=\"C:\\\\DIR\\\\FILE.TXT\",error=\"Cannot find file:\\n\\\"FILE.TXT\\\"\"} 1.458255915e9\n", None),
    ("help_escapes", TEXT, b"# HELP h A \\\\ backslash and a \\n newline.\n# TYPE h gauge\nh 1\n", None),
    ("nan_inf", TEXT, b"a NaN\nb +Inf\nc -Inf\nd{x=\"y\"} Inf\n", None),
    ("no_newline_at_end", TEXT, b"# TYPE g gauge\ng{a=\"1\"} 2", None),
    ("histogram", TEXT, b"# HELP h Latency.\n# TYPE h histogram\n"
     b"h_bucket{le=\"0.05\"} 24054\nh_bucket{le=\"0.1\"} 33444\nh_bucket{le=\"+Inf\"} 144320\n"
     b"h_sum 53423\nh_count 144320\n", None),
    ("summary", TEXT, b"# TYPE s summary\ns{quantile=\"0.01\"} 3102\ns{quantile=\"0.99\"} NaN\n"
     b"s_sum 1.7560473e+07\ns_count 2693\n", None),
    ("timestamps", TEXT, b"a 1 -3982045\nb 2 0\nc 3 1700000000123\n", None),
    ("blank_lines_and_comments", TEXT, b"\n# just a comment\n\n   \na 1\n#\n", None),
    ("utf8_value", TEXT, "a{model_name=\"Llama-3 \u00e9\u4e2d\"} 1\n".encode(), None),
    ("sglang_text", TEXT, b"# HELP sglang:num_running_reqs The number of running requests.\n"
     b"# TYPE sglang:num_running_reqs gauge\n"
     b"sglang:num_running_reqs{engine_type=\"unified\",model_name=\"m\",pp_rank=\"0\",tp_rank=\"0\"} 3.0\n"
     b"# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.\n"
     b"# TYPE sglang:time_to_first_token_seconds histogram\n"
     b"sglang:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 1.0\n"
     b"sglang:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 4.0\n"
     b"sglang:time_to_first_token_seconds_count{model_name=\"m\"} 4.0\n"
     b"sglang:time_to_first_token_seconds_sum{model_name=\"m\"} 5.5\n", None),
    ("duplicate_series", TEXT, b"x{a=\"1\",b=\"2\"} 1\nx{a=\"1\",b=\"2\"} 2\nx{a=\"1\"} 3\n", None),
    ("many_series", TEXT, b"".join(b"m{i=\"%d\"} %d\n" % (i, i) for i in range(3000)), None),
    # hostile text
    ("huge_line", TEXT, b"a{x=\"" + b"y" * 200000 + b"\"} 1\n",
     "DIFFER: a line longer than line_length_limit is refused; prometheus_client has no limit"),
    ("too_many_samples", TEXT, b"".join(b"s%d 1\n" % i for i in range(SAMPLE_LIMIT + 1)),
     "DIFFER: over sample_limit (5000 in this run) the scrape is refused"),
    ("too_many_labels", TEXT, b"a{" + b",".join(b"l%d=\"v\"" % i for i in range(80)) + b"} 1\n",
     "DIFFER: over label_limit (64 in this run) the scrape is refused"),
    ("label_twice", TEXT, b"a{x=\"1\",x=\"2\"} 1\n", "DIFFER: " + PY_LAX + " (the last value wins)"),
    ("unterminated_value", TEXT, b"a{x=\"1} 1\n", None),
    ("unquoted_value", TEXT, b"a{x=1} 1\n", None),
    ("no_value", TEXT, b"a\n", None),
    ("hex_value", TEXT, b"a 0x10\n", None),
    ("float_timestamp", TEXT, b"a 1 1.5\n", "DIFFER: " + PY_LAX),
    ("three_tokens", TEXT, b"a 1 2 3\n", "DIFFER: " + PY_LAX + " (the last token is the timestamp)"),
    ("exemplar_in_text", TEXT, b"a 1 # {x=\"y\"} 1\n", None),
    ("bad_utf8", TEXT, b"a{x=\"\xff\xfe\"} 1\n", None),  # theirs: the text does not decode
    ("nul_byte", TEXT, b"a{x=\"a\x00b\"} 1\n", "DIFFER: " + PY_LAX),
    ("second_type", TEXT, b"# TYPE a gauge\na 1\n# TYPE a counter\na 2\n",
     "DIFFER: " + PY_LAX + " (a second family of the same name)"),
    ("type_after_samples", TEXT, b"a 1\n# TYPE a gauge\n",
     "DIFFER: " + PY_LAX),
    ("unknown_type", TEXT, b"# TYPE a nonsense\na 1\n", None),
    ("crlf", TEXT, b"a 1\r\nb 2\r\n", "DIFFER: " + PY_LAX + " (it strips the carriage return)"),
    ("bad_name", TEXT, b"1a 1\n", None),
    ("underscore_number", TEXT, b"a 1_000\n", "DIFFER: " + PY_LAX + " (Python's float() reads 1_000)"),
    # OpenMetrics
    ("om_basic", OM, b"# TYPE c_seconds counter\n# UNIT c_seconds seconds\n# HELP c_seconds Some \\\"text\\\" and \\\\.\n"
     b"c_seconds_total{a=\"b\"} 17.0\nc_seconds_created{a=\"b\"} 1520430000.123\n# EOF\n", None),
    ("om_unit_mismatch", OM, b"# TYPE c counter\n# UNIT c seconds\nc_total 1\n# EOF\n",
     "DIFFER: prometheus_client refuses a unit that is not the name's suffix; spanfence keeps the unit as declared"),
    ("om_timestamps", OM, b"# TYPE g gauge\ng{a=\"1\"} 1 1520879607.789\ng{a=\"2\"} 2 1520879607\n# EOF\n", None),
    ("om_exemplar", OM, b"# TYPE c counter\nc_total 17.0 # {trace_id=\"KOO5S4vxi0o\"} 0.67 1520879602.890\n# EOF\n", None),
    ("om_histogram", OM, b"# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_bucket{le=\"+Inf\"} 4\n"
     b"h_count 4\nh_sum 5.5\nh_created 1520430000\n# EOF\n", None),
    ("om_info_stateset", OM, b"# TYPE i info\ni_info{version=\"1.2\"} 1\n# TYPE st stateset\n"
     b"st{st=\"a\"} 1\nst{st=\"b\"} 0\n# EOF\n", None),
    ("om_gaugehistogram", OM, b"# TYPE gh gaugehistogram\ngh_bucket{le=\"+Inf\"} 3\ngh_gcount 3\ngh_gsum 2\n# EOF\n", None),
    ("om_unknown", OM, b"# TYPE u unknown\nu 1\nv{a=\"b\"} NaN\n# EOF\n", None),
    ("om_eof_no_newline", OM, b"a 1\n# EOF", None),
    ("om_missing_eof", OM, b"a 1\n", None),
    ("om_text_after_eof", OM, b"a 1\n# EOF\nb 1\n", None),
    ("om_blank_line", OM, b"a 1\n\n# EOF\n", None),
    ("om_comment", OM, b"# hello\na 1\n# EOF\n", None),
    ("om_bad_escape", OM, b"a{x=\"\\q\"} 1\n# EOF\n", None),
    ("om_long_exemplar", OM, b"# TYPE c counter\nc_total 1 # {x=\"" + b"a" * 200 + b"\"} 1\n# EOF\n", None),
    ("om_two_spaces", OM, b"a  1\n# EOF\n", None),
    ("om_histogram_no_inf", OM, b"# TYPE h histogram\nh_bucket{le=\"0.1\"} 1\nh_count 1\nh_sum 1\n# EOF\n",
     "DIFFER: prometheus_client requires the +Inf bucket; spanfence takes the count as the last bucket"),
    ("om_negative_counter", OM, b"# TYPE c counter\nc_total -1\n# EOF\n",
     "DIFFER: prometheus_client refuses a negative counter; spanfence converts it as exposed"),
]



def norm_value(v):
    v = float(v)
    return "NaN" if math.isnan(v) else repr(v)


def norm_type(typ):
    """prometheus_client calls the text format's untyped unknown."""
    return "unknown" if typ == "untyped" else typ


def fam_key(name, typ):
    """Counters' family names differ by _total between the parsers."""
    return name[:-6] if typ == "counter" and name.endswith("_total") else name


def sample_key(name, typ, labels):
    if typ == "counter" and name.endswith("_total"):
        name = name[:-6]
    return (name, tuple(sorted(labels.items())))


def python_read(fmt, body):
    text = body.decode("utf-8")  # UnicodeDecodeError: refused
    parse = om_parser.text_string_to_metric_families if fmt == OM else text_parser.text_string_to_metric_families
    series, helps, dups = {}, {}, 0
    for fam in parse(text):
        helps[fam_key(fam.name, fam.type)] = fam.documentation
        for s in fam.samples:
            k = sample_key(s.name, fam.type, s.labels)
            if k in series:
                dups += 1
                continue
            ts = None
            if s.timestamp is not None:
                t = s.timestamp
                ts = (t.sec * 1000 + t.nsec / 1e6) if hasattr(t, "sec") else float(t) * 1000
            series[k] = (norm_value(s.value), ts, norm_type(fam.type))
    return series, helps, dups


def ours_read(dump, fmt, body):
    with tempfile.NamedTemporaryFile(suffix=".prom") as f:
        f.write(body)
        f.flush()
        args = [dump, "--sample-limit", str(SAMPLE_LIMIT), "--label-limit", str(LABEL_LIMIT),
                "--max-line", str(MAX_LINE)]
        if fmt == OM:
            args.append("--openmetrics")
        out = subprocess.run(args + [f.name], check=True, capture_output=True).stdout
    doc = json.loads(out)
    if not doc["ok"]:
        return None, doc["reason"] + ": " + doc["error"]
    series, helps = {}, {}
    for fam in doc["families"]:
        if fam["samples"] or fam["help"]:
            helps[fam_key(fam["name"], fam["type"])] = fam["help"]
        for s in fam["samples"]:
            if s["duplicate"]:
                continue
            k = sample_key(s["name"], fam["type"], s["labels"])
            series[k] = (norm_value(s["value"].replace("+Inf", "inf").replace("-Inf", "-inf")),
                         s["timestamp_ms"], norm_type(fam["type"]))
    return (series, helps, doc["duplicates"]), None


def compare(ours, theirs):
    o_series, o_helps, o_dups = ours
    p_series, p_helps, p_dups = theirs
    problems = []
    if set(o_series) != set(p_series):
        problems.append("series differ: only ours %s, only theirs %s" % (
            sorted(set(o_series) - set(p_series))[:3], sorted(set(p_series) - set(o_series))[:3]))
    for k in set(o_series) & set(p_series):
        ov, ots, otype = o_series[k]
        pv, pts, ptype = p_series[k]
        if ov != pv:
            problems.append("%s: value %s vs %s" % (k, ov, pv))
        if (ots is None) != (pts is None) or (ots is not None and abs(ots - pts) > 1):
            problems.append("%s: timestamp %s vs %s" % (k, ots, pts))
        if otype != ptype:
            problems.append("%s: type %s vs %s" % (k, otype, ptype))
    for name, h in p_helps.items():
        if h and o_helps.get(name, "") != h:
            problems.append("help of %s: %r vs %r" % (name, o_helps.get(name), h))
    if o_dups != p_dups:
        problems.append("duplicates %d vs %d" % (o_dups, p_dups))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", required=True)
    args = ap.parse_args()
    failures = 0
    agreed = refused_both = declared = 0
    for name, fmt, body, differ in CASES:
        try:
            theirs, perr = python_read(fmt, body), None
        except Exception as e:  # noqa: BLE001 - any exception is a refusal
            theirs, perr = None, "%s: %s" % (type(e).__name__, str(e)[:80])
        ours, oerr = ours_read(args.dump, fmt, body)
        if ours is None and theirs is None:
            outcome, detail = "both refuse", "ours: %s; theirs: %s" % (oerr, perr)
        elif ours is None or theirs is None:
            outcome = "only we refuse" if ours is None else "only they refuse"
            detail = oerr if ours is None else perr
        else:
            problems = compare(ours, theirs)
            outcome = "agree" if not problems else "differ"
            detail = "; ".join(problems[:4])
        same = outcome in ("agree", "both refuse")
        if differ is None and not same:
            print("FAIL %-24s %s: %s" % (name, outcome, detail))
            failures += 1
        elif differ is not None and same:
            print("FAIL %-24s declared '%s' but the parsers now %s" % (name, differ, outcome))
            failures += 1
        else:
            print("ok   %-24s %s%s" % (name, outcome, (" (" + differ + ")") if differ else ""))
            if differ:
                declared += 1
            elif outcome == "agree":
                agreed += 1
            else:
                refused_both += 1
    print("%d cases: %d agree, %d both refuse, %d declared differences, %d failures" % (
        len(CASES), agreed, refused_both, declared, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
