# tests/e2e/privacy/peers.py: the real processes and peers around the
# collector for the differential test: free loopback ports, the spanfence
# process (config written to the scratch dir, stderr to a file, SIGTERM to
# stop), the three exporter sinks (an HTTP server, a grpcio server with a
# generic handler taking raw bytes, and a reader of the file exporter's
# length-prefixed records), and the five sending transports.

import gzip
import http.client
import http.server
import os
import socket
import struct
import subprocess
import threading
import time
import urllib.request
import zlib

import grpc

EXPORT_METHOD = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
TRANSPORTS = ["grpc", "grpc+gzip", "http", "http+gzip", "http+deflate"]


_ports_given = set()


def free_port():
    """A port the kernel says is free, never one this process was given
    before (the kernel may hand a just-released port straight back, so two
    calls in a row could name the same port for two listeners)."""
    while True:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _ports_given:
            _ports_given.add(port)
            return port


class Collector:
    """`args`: more arguments after --config (a second --config, --set).
    `consumers_normal`: the collector runs without CAP_SYS_NICE (setpriv
    drops it from the bounding set; RLIMIT_NICE stays as it is, 0 here), so
    its consumers never enter SCHED_IDLE (sf_thread.c: they would not be
    able to come back). For a test that waits for each request's export
    before sending the next: on a machine whose CPUs are busy, an export of
    a consumer at SCHED_IDLE waits tens of milliseconds for a CPU by design
    (the engine first), and thousands of such waits in a row measure the
    scheduler, not what the test is about."""

    def __init__(self, binary, dir_, name, config, grpc_port, metrics_port, args=(),
                 consumers_normal=False):
        self.binary, self.dir, self.name = binary, dir_, name
        self.args = list(args)
        self.prefix = (["setpriv", "--inh-caps=-sys_nice", "--bounding-set=-sys_nice"]
                       if consumers_normal and os.geteuid() == 0 else [])
        self.config_path = os.path.join(dir_, name + ".yaml")
        self.stderr_path = os.path.join(dir_, name + ".stderr.log")
        self.grpc_port, self.metrics_port = grpc_port, metrics_port
        with open(self.config_path, "w") as f:
            f.write(config)
        self.proc = None

    def validate(self):
        r = subprocess.run([self.binary, "validate", "--config", self.config_path],
                           capture_output=True, text=True)
        return r.returncode, r.stdout + r.stderr

    def start(self, timeout=30):
        err = open(self.stderr_path, "w")
        self.proc = subprocess.Popen(self.prefix + [self.binary, "--config", self.config_path] + self.args,
                                     stdin=subprocess.DEVNULL, stdout=err, stderr=err)
        err.close()
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited during start-up with %s:\n%s" %
                                   (self.name, self.proc.returncode, self.stderr_tail()))
            try:
                socket.create_connection(("127.0.0.1", self.grpc_port), 0.2).close()
                self.metrics()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("%s did not start serving within %ds:\n%s" % (self.name, timeout, self.stderr_tail()))

    def metrics(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % self.metrics_port, timeout=5) as r:
            return r.read().decode()

    def stop(self, timeout=30):
        """SIGTERM; the exit code (None when it had to be killed)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr_tail(self, n=40):
        try:
            with open(self.stderr_path, errors="replace") as f:
                return "".join(f.readlines()[-n:])
        except OSError:
            return ""


def metric_series(text, name):
    """[(labels, value)] of every series `name` in a Prometheus text."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        mname, _, rest = head.partition("{")
        if mname != name:
            continue
        lab = {}
        for part in rest.rstrip("}").split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                lab[k.strip()] = v.strip().strip('"')
        out.append((lab, float(value)))
    return out


def metric_sum(text, name, **labels):
    """Sum of the series `name` whose labels include `labels`; None when the
    collector exports no such series."""
    total, found = 0, False
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        head, _, value = line.rpartition(" ")
        mname, _, rest = head.partition("{")
        if mname != name:
            continue
        lab = {}
        for part in rest.rstrip("}").split(","):
            if "=" in part:
                k, v = part.split("=", 1)
                lab[k.strip()] = v.strip().strip('"')
        if all(lab.get(k) == v for k, v in labels.items()):
            total += float(value)
            found = True
    return int(total) if found else None


class Inbox:
    """Bodies received by a sink, in arrival order."""

    def __init__(self):
        self.items = []
        self.cv = threading.Condition()

    def put(self, item):
        with self.cv:
            self.items.append(item)
            self.cv.notify_all()

    def wait_count(self, n, timeout):
        with self.cv:
            return self.cv.wait_for(lambda: len(self.items) >= n, timeout)

    def __len__(self):
        with self.cv:
            return len(self.items)


class HttpSink:
    """An OTLP/HTTP gateway: takes POST /v1/traces, decompresses gzip,
    answers 200 with an empty ExportTraceServiceResponse."""

    def __init__(self):
        self.inbox = Inbox()
        inbox = self.inbox

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                enc = (self.headers.get("Content-Encoding") or "").lower()
                err = None
                try:
                    if enc == "gzip":
                        body = gzip.decompress(body)
                    elif enc not in ("", "identity"):
                        err = "unexpected Content-Encoding %r" % enc
                except OSError as e:
                    err = "body does not decompress: %s" % e
                inbox.put({"body": body, "path": self.path, "encoding": enc, "error": err,
                           "content_type": self.headers.get("Content-Type")})
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        class Server(http.server.ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass    # the exporter closing its connection at shutdown

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class GrpcSink:
    """An OTLP/gRPC gateway: a generic handler that keeps the raw request
    bytes (grpcio undoes grpc-encoding gzip) and answers an empty response."""

    def __init__(self):
        self.inbox = Inbox()

        def export(body, context):
            self.inbox.put({"body": body, "error": None})
            return b""

        handler = grpc.method_handlers_generic_handler(
            "opentelemetry.proto.collector.trace.v1.TraceService",
            {"Export": grpc.unary_unary_rpc_method_handler(export)})
        self.server = grpc.server(__import__("concurrent.futures").futures.ThreadPoolExecutor(4),
                                  handlers=[handler])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def close(self):
        self.server.stop(0)


class FileSink:
    """Reads the file exporter's records (4-byte big-endian length, then the
    protobuf bytes) as they are appended."""

    def __init__(self, path):
        self.path = path
        self.buf = b""
        self.records = []
        self.error = None

    def poll(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(len(self.buf))
                self.buf += f.read()
        except FileNotFoundError:
            return
        off = sum(4 + len(r) for r in self.records)
        while off + 4 <= len(self.buf):
            n = struct.unpack(">I", self.buf[off:off + 4])[0]
            if off + 4 + n > len(self.buf):
                break
            self.records.append(self.buf[off + 4:off + 4 + n])
            off += 4 + n

    def wait_count(self, n, timeout):
        deadline = time.time() + timeout
        delay = 0.0005
        while True:
            self.poll()
            if len(self.records) >= n:
                return True
            if time.time() > deadline:
                return False
            time.sleep(delay)
            delay = min(delay * 2, 0.01)

    def leftover(self):
        self.poll()
        return len(self.buf) - sum(4 + len(r) for r in self.records)


class Sender:
    """Sends one request over one of TRANSPORTS; returns (accepted: bool,
    code: grpc status name or HTTP status, detail)."""

    def __init__(self, grpc_port, http_port):
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % grpc_port)
        self.export = self.channel.unary_unary(EXPORT_METHOD)
        self.http_port = http_port
        self.conn = None

    def send(self, transport, data):
        if transport.startswith("grpc"):
            comp = grpc.Compression.Gzip if transport == "grpc+gzip" else grpc.Compression.NoCompression
            try:
                self.export(data, timeout=20, compression=comp)
                return True, "OK", ""
            except grpc.RpcError as e:
                return False, e.code().name, e.details() or ""
        headers = {"Content-Type": "application/x-protobuf"}
        body = data
        if transport == "http+gzip":
            body = gzip.compress(data)
            headers["Content-Encoding"] = "gzip"
        elif transport == "http+deflate":
            body = zlib.compress(data)
            headers["Content-Encoding"] = "deflate"
        for attempt in range(2):
            try:
                if self.conn is None:
                    self.conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=20)
                self.conn.request("POST", "/v1/traces", body, headers)
                r = self.conn.getresponse()
                text = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.conn.close()
                    self.conn = None
                return r.status == 200, r.status, text[:200]
            except (http.client.HTTPException, OSError):
                if self.conn is not None:
                    self.conn.close()
                self.conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        self.channel.close()
        if self.conn is not None:
            self.conn.close()
