#!/bin/sh
# tests/build/schema_decisions.sh SOURCE_DIR PROTOC PYTHON3: the codec's
# tables are generated only when every field of the OTLP trace, logs and
# metrics schemas has a decision in pipeline/proto/*_fields.txt. Runs tools/gen_otlp_schema.py
# on the real schema (it must succeed: the control), then on copies broken
# one way each, and checks that each is refused with its own message; and
# that a field added with its row is in the JSON codec's table.
set -u
src=$1 protoc=$2 py=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

gen() {     # gen PROTO_DIR FIELDS_TXT: the generator's exit status; stderr in $tmp/err
    "$protoc" --include_imports --descriptor_set_out="$tmp/d.desc" -I"$1" \
        "$1/opentelemetry/proto/collector/trace/v1/trace_service.proto" \
        "$1/opentelemetry/proto/collector/logs/v1/logs_service.proto" \
        "$1/opentelemetry/proto/collector/metrics/v1/metrics_service.proto" 2>"$tmp/err" || return 99
    "$py" "$src/tools/gen_otlp_schema.py" "$tmp/d.desc" "$tmp/out.h" "$2" \
        "$1/logs_fields.txt" "$1/metrics_fields.txt" 2>"$tmp/err"
}

expect_refused() {  # expect_refused WHAT PATTERN PROTO_DIR FIELDS_TXT
    if gen "$3" "$4"; then
        echo "FAIL: $1: the generator accepted it"; fails=$((fails + 1))
    elif ! grep -q "$2" "$tmp/err"; then
        echo "FAIL: $1: refused, but not with '$2':"; cat "$tmp/err"; fails=$((fails + 1))
    else
        echo "ok: $1: $(head -n 1 "$tmp/err")"
    fi
}

fresh() {   # fresh: a copy of the schema source in $tmp/p
    rm -rf "$tmp/p"; cp -r "$src/pipeline/proto" "$tmp/p"
}

fresh
if gen "$tmp/p" "$tmp/p/trace_fields.txt"; then
    echo "ok: the schema as it is generates"
else
    echo "FAIL: the schema as it is does not generate:"; cat "$tmp/err"; fails=$((fails + 1))
fi

# A new string field in Span, as a future OTLP version might add.
fresh
sed -i 's|^\(  Status status = 15;\)|\1\n  string note = 17;|' "$tmp/p/opentelemetry/proto/trace/v1/trace.proto"
grep -q 'string note = 17;' "$tmp/p/opentelemetry/proto/trace/v1/trace.proto" || { echo "FAIL: sed"; exit 1; }
expect_refused "a string field added to Span" \
    "string/bytes field 'Span.note' (number 17) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A new bytes field in an event: bytes carry text as well as strings do.
fresh
sed -i 's|^\(    uint32 dropped_attributes_count = 4;\)|\1\n    bytes payload = 5;|' "$tmp/p/opentelemetry/proto/trace/v1/trace.proto"
expect_refused "a bytes field added to Span.Event" \
    "string/bytes field 'Event.payload' (number 5) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A string field decided without a rule.
fresh
sed -i 's|^field Span.name .*|field Span.name plain -|' "$tmp/p/trace_fields.txt"
expect_refused "Span.name with no rule" "needs a rule" "$tmp/p" "$tmp/p/trace_fields.txt"

# A decision removed.
fresh
sed -i '/^field InstrumentationScope.version /d' "$tmp/p/trace_fields.txt"
expect_refused "InstrumentationScope.version's row removed" \
    "'InstrumentationScope.version' (number 2) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A rule naming a governed field nobody declared.
fresh
sed -i 's|^field Span.name .*|field Span.name plain field:SPAN_TITLE|' "$tmp/p/trace_fields.txt"
expect_refused "an unknown governed field" "unknown rule 'field:SPAN_TITLE'" "$tmp/p" "$tmp/p/trace_fields.txt"

# A row for a field the schema lacks.
fresh
echo "field Span.prompt plain field:SPAN_NAME" >>"$tmp/p/trace_fields.txt"
expect_refused "a row for a field the schema lacks" "no field 'prompt'" "$tmp/p" "$tmp/p/trace_fields.txt"

# A new string field in LogRecord.
fresh
sed -i 's|^\(  string event_name = 12;\)|\1\n  string prompt = 13;|' "$tmp/p/opentelemetry/proto/logs/v1/logs.proto"
grep -q 'string prompt = 13;' "$tmp/p/opentelemetry/proto/logs/v1/logs.proto" || { echo "FAIL: sed"; exit 1; }
expect_refused "a string field added to LogRecord" \
    "string/bytes field 'LogRecord.prompt' (number 13) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A new string field in a metric data point.
fresh
sed -i 's|^\(  uint32 flags = 8;\)|\1\n  string label = 9;|' "$tmp/p/opentelemetry/proto/metrics/v1/metrics.proto"
grep -q 'string label = 9;' "$tmp/p/opentelemetry/proto/metrics/v1/metrics.proto" || { echo "FAIL: sed"; exit 1; }
expect_refused "a string field added to NumberDataPoint" \
    "string/bytes field 'NumberDataPoint.label' (number 9) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# The log body decided without its rule.
fresh
sed -i 's|^field LogRecord.body .*|field LogRecord.body plain -|' "$tmp/p/logs_fields.txt"
expect_refused "LogRecord.body's rule removed" \
    "value field 'LogRecord.body' needs a rule" "$tmp/p" "$tmp/p/trace_fields.txt"

# A metric name decision removed.
fresh
sed -i '/^field Metric.unit /d' "$tmp/p/metrics_fields.txt"
expect_refused "Metric.unit's row removed" \
    "'Metric.unit' (number 3) has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A governed field whose decision (set by which list, or '-') is removed.
fresh
sed -i 's|^governs SCOPE_VERSION .*|governs SCOPE_VERSION scope.version|' "$tmp/p/trace_fields.txt"
expect_refused "SCOPE_VERSION's decision removed" \
    "governed field 'SCOPE_VERSION' has no decision" "$tmp/p" "$tmp/p/trace_fields.txt"

# A set field said in a list whose statements cannot name its context.
fresh
sed -i 's|^\(governs LOG_BODY  *log.body  *\)logs|\1traces|' "$tmp/p/logs_fields.txt"
grep -q '^governs LOG_BODY .* traces ' "$tmp/p/logs_fields.txt" || { echo "FAIL: sed"; exit 1; }
expect_refused "LOG_BODY set in trace_statements" \
    "'log.body' is not <context>.<path> with a context of traces" "$tmp/p" "$tmp/p/trace_fields.txt"

# A set field without the statement declared mode asks for.
fresh
sed -i 's|^\(governs METRIC_UNIT  *metric.unit  *metrics\).*|\1|' "$tmp/p/metrics_fields.txt"
expect_refused "METRIC_UNIT without its declared statement" \
    "governed field 'METRIC_UNIT' has no statement declared mode asks for" \
    "$tmp/p" "$tmp/p/trace_fields.txt"

# A message every signal holds, its fields declared out of number order:
# OTLP/JSON writes a trace message's members in declaration order and the
# others' in number order, so the two would differ.
fresh
sed -i '/^  repeated opentelemetry.proto.common.v1.KeyValue attributes = 1;/{h;d};/^  uint32 dropped_attributes_count = 2;/G' \
    "$tmp/p/opentelemetry/proto/resource/v1/resource.proto"
grep -A1 'dropped_attributes_count = 2;' "$tmp/p/opentelemetry/proto/resource/v1/resource.proto" \
    | grep -q 'attributes = 1;' || { echo "FAIL: sed"; exit 1; }
expect_refused "Resource's fields declared out of number order" \
    "message 'opentelemetry.proto.resource.v1.Resource' is shared by the signals and declares" \
    "$tmp/p" "$tmp/p/trace_fields.txt"

# A field added to the schema with its row needs no JSON code: the JSON
# table maps it (its names, its number) with the rest.
fresh
sed -i 's|^\(  Status status = 15;\)|\1\n  uint32 note_count = 17;|' "$tmp/p/opentelemetry/proto/trace/v1/trace.proto"
echo "field Span.note_count plain -" >>"$tmp/p/trace_fields.txt"
if ! gen "$tmp/p" "$tmp/p/trace_fields.txt"; then
    echo "FAIL: a field added with its row does not generate:"; cat "$tmp/err"; fails=$((fails + 1))
elif ! sed -n '/^static const sf_otlp_json_field sf_otlp_jf_span\[\]/,/^};/p' "$tmp/out.h" \
        | grep -q '{ "noteCount", "note_count", 17, -1, 0 },'; then
    echo "FAIL: the JSON table lacks Span.note_count"; fails=$((fails + 1))
else
    echo "ok: a field added with its row is in the JSON table"
fi

[ "$fails" -eq 0 ] || { echo "$fails case(s) failed"; exit 1; }
