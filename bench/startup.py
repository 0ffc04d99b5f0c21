#!/usr/bin/python3
# bench/startup.py: start-up and idle memory of the collector. For each
# config, prints the time from launching it to its OTLP/gRPC port accepting a
# connection and to its READY log line ("spanfence ... running with": every
# listener up), median and range of RUNS starts, the CPU its threads ran
# until each (/proc/<pid>/task/*/schedstat) and 0.3 s later (what the whole
# start cost, work done after READY included), the idle RSS of the same
# starts (median and range, 0.3 s after listening), split into anonymous
# memory (heap, thread stacks, the rest) and the file-backed pages touched by
# library (/proc/<pid>/smaps of the last start), the threads, and once the
# CPU a bare load of the binary costs (`--version`: the dynamic loader and
# the libraries' constructors, nothing of spanfence's own start).
#
#   /usr/bin/python3 bench/startup.py [RUNS=30] [CONFIG...]
#   CONFIG: bench    bench/configs/pipeline.yaml (OTLP/gRPC in, OTLP/HTTP out; the default)
#           default  configs/default.yaml, the README's first command (OTLP in, debug out)
#           cvm      configs/cvm.yaml, the production config (OTLP, prometheus and
#                    journald in, two OTLP/HTTP exporters to a gateway that is not there)
#           each with its ports moved to the SF_BENCH_* ones below
#   BUILD=build                        the build directory
#   BUILDS="build /tmp/base/build"     several builds side by side: their starts
#       alternate (one of each in turn), the figures are printed in columns
#       from the same run, and the by-library split is the first build's
#   SF_BENCH_COLLECTOR="cmd args..."   another collector, listening for
#       OTLP/gRPC on 127.0.0.1:$SF_BENCH_GRPC_PORT (CONFIG ignored, no --version row)
#   SF_BENCH_PIN=1|0                   the collector on CPU 0, this script on
#       CPU 1 (default 1 with 2 CPUs or more)
import collections
import os
import resource
import select
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 30
configs = sys.argv[2:] or ["bench"]
builds = os.environ.get("BUILDS", "").split() or [os.environ.get("BUILD", "build")]
for k, v in (("SF_BENCH_GRPC_PORT", "14317"), ("SF_BENCH_SINK_PORT", "14319"),
             ("SF_BENCH_METRICS_PORT", "18888"), ("SF_BENCH_HTTP_PORT", "14318")):
    os.environ.setdefault(k, v)
port = int(os.environ["SF_BENCH_GRPC_PORT"])
peer = os.environ.get("SF_BENCH_COLLECTOR", "")
pin = os.environ.get("SF_BENCH_PIN", "1") == "1" and os.cpu_count() >= 2
tmp = tempfile.mkdtemp(prefix="sf-startup-")
READY = b" running with "       # the log line after every listener is up


def command(name, build):
    """The command line and extra environment of one config."""
    e = os.environ
    binary = os.path.join(build, "spanfence")
    moved = ["--set", f"receivers.otlp.protocols.grpc.endpoint=127.0.0.1:{port}",
             "--set", f"receivers.otlp.protocols.http.endpoint=127.0.0.1:{e['SF_BENCH_HTTP_PORT']}",
             "--set", f"service.telemetry.metrics.address=127.0.0.1:{e['SF_BENCH_METRICS_PORT']}"]
    if name == "bench":
        return [binary, "--config", "bench/configs/pipeline.yaml"], {}
    if name == "default":
        # health_check keeps its port (13133): nothing else here uses it
        return [binary, "--config", "configs/default.yaml"] + moved, {}
    if name == "cvm":
        return ([binary, "--config", "configs/cvm.yaml"] + moved +
                ["--set", f"receivers.journald.cursor_file={tmp}/journald.cursor"],
                {"SPANFENCE_PSEUDONYM_KEY": "0123456789abcdef0123456789abcdef",
                 "SPANFENCE_GATEWAY_ENDPOINT": f"http://127.0.0.1:{e['SF_BENCH_SINK_PORT']}",
                 "SPANFENCE_GATEWAY_TOKEN": "startup"})
    sys.exit(f"startup.py: unknown config '{name}' (bench, default or cvm)")


def on_cpu(cpu):
    """This script on `cpu`. A child inherits it: the collector is started
    from CPU 0 without a preexec_fn, so Python can vfork and exec it at once
    (a preexec_fn runs Python in the child, in the collector's CPU and wall
    time)."""
    if pin:
        os.sched_setaffinity(0, {cpu})


on_cpu(1)


def listening():
    s = socket.socket()
    try:
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def rollup(pid):
    text = open(f"/proc/{pid}/smaps_rollup").read()
    return {l.split(":")[0]: int(l.split()[1]) for l in text.splitlines()[1:] if l.endswith("kB")}


def cpu_ms(pid):
    """CPU the process's threads have run so far (schedstat: ns on a CPU,
    finer than utime + stime's ticks; threads that ended are not counted)."""
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except (OSError, IndexError):
            pass
    return total / 1e6


class Figures:
    def __init__(self, cmd):
        self.cmd = cmd
        self.listen, self.listen_cpu, self.ready, self.ready_cpu = [], [], [], []
        self.rss, self.idle_cpu, self.smaps, self.kib, self.threads = [], [], "", {}, 0


def start_once(f, env):
    """One start of f.cmd: the times to the port accepting and to the READY
    line, the CPU until each, then the idle figures 0.3 s later."""
    if listening():
        sys.exit(f"startup.py: something already listens on port {port}")
    on_cpu(0)
    t0 = time.monotonic()
    p = subprocess.Popen(f.cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, env=env)
    on_cpu(1)
    os.set_blocking(p.stderr.fileno(), False)
    log, t_listen, t_ready = b"", None, None if not peer else 0.0
    while t_listen is None or t_ready is None:
        if t_ready is None:
            r, _, _ = select.select([p.stderr], [], [], 0.0002)
            if r:
                log += p.stderr.read() or b""
                if READY in log:
                    t_ready = time.monotonic()
                    f.ready.append((t_ready - t0) * 1000)
                    f.ready_cpu.append(cpu_ms(p.pid))
        else:
            time.sleep(0.0002)
        if t_listen is None and listening():
            t_listen = time.monotonic()
            f.listen.append((t_listen - t0) * 1000)
            f.listen_cpu.append(cpu_ms(p.pid))
        if p.poll() is not None or time.monotonic() - t0 > 10:
            sys.exit(f"startup.py: the collector never listened on port {port} "
                     f"({' '.join(f.cmd)}): {log.decode(errors='replace')[-2000:]}")
    time.sleep(0.3)
    f.idle_cpu.append(cpu_ms(p.pid))
    f.smaps = open(f"/proc/{p.pid}/smaps").read()
    f.kib = rollup(p.pid)
    f.rss.append(f.kib["Rss"] / 1024)
    f.threads = len(os.listdir(f"/proc/{p.pid}/task"))
    p.kill()                # idle figures only: no drain to wait for
    p.wait()
    p.stderr.close()
    while listening():      # the port is free again before the next start
        time.sleep(0.01)


def med(v):
    return f"{statistics.median(v):.1f} ({min(v):.1f}-{max(v):.1f})" if v else "-"


def by_library(f):
    kib = f.kib
    print(f"  {f.cmd[0]}: idle {kib['Anonymous'] / 1024:.1f} MiB anonymous, "
          f"{(kib['Rss'] - kib['Anonymous']) / 1024:.1f} MiB file-backed "
          f"({kib['Pss_File'] / 1024:.1f} MiB of it PSS), {f.threads} threads")
    by, anon = collections.Counter(), collections.Counter()
    name = size = 0
    for line in f.smaps.splitlines():
        w = line.split()
        if "-" in w[0] and len(w) >= 5 and not w[0].endswith(":"):
            lo, hi = (int(x, 16) for x in w[0].split("-"))
            size, name = hi - lo, (w[5] if len(w) > 5 else "")
        elif w[0] == "Rss:" and name.startswith("/"):
            by[name] += int(w[1])    # a library's relocated (anonymous) pages count here too
        elif w[0] == "Anonymous:" and int(w[1]) and not name.startswith("/"):
            # a thread's stack is an 8 MiB (RLIMIT_STACK) mapping or one a
            # thread attribute sized; the heap is named; the rest is malloc's
            # other arenas, the PCRE2 JIT and libraries' mmaps
            kind = "heap" if name == "[heap]" else "main stack" if name == "[stack]" else \
                "thread stacks" if size >= 1 << 20 and size % (1 << 20) <= 8192 else "other"
            anon[kind] += int(w[1])
    print("  anonymous (KiB): " + ", ".join(f"{k} {v}" for k, v in anon.most_common()))
    print(f"  file-backed and relocated pages by object (KiB, the largest of "
          f"{len(by)} objects mapped):")
    for n, k in by.most_common(10):
        print(f"  {k:8d}  {n}")


def measure(name):
    figs, envs = [], []
    for b in builds:
        cmd, extra = (shlex.split(peer), {}) if peer else command(name, b)
        figs.append(Figures(cmd))
        envs.append(dict(os.environ, **extra))
    for _ in range(runs):
        for f, env in zip(figs, envs):
            start_once(f, env)
    print(f"== {name if not peer else 'SF_BENCH_COLLECTOR'}: {' '.join(figs[0].cmd[1:])}")
    print(f"  {runs} starts each, alternating; median (range); pinning: "
          f"{'collector on CPU 0, this script on CPU 1' if pin else 'none'}; "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    w = max(24, max(len(b) for b in builds) + 2)
    print(f"  {'':34}" + "".join(f"{b:>{w}}" for b in (builds if not peer else ["peer"])))
    for label, attr in (("wall to port accepting, ms", "listen"),
                        ("  its CPU until then, ms", "listen_cpu"),
                        ("wall to READY log line, ms", "ready"),
                        ("  its CPU until then, ms", "ready_cpu"),
                        ("its CPU 0.3 s after, idle, ms", "idle_cpu"),
                        ("idle RSS (0.3 s after), MiB", "rss")):
        print(f"  {label:34}" + "".join(f"{med(getattr(f, attr)):>{w}}" for f in figs))
    by_library(figs[0])


for c in (configs if not peer else ["peer"]):
    measure(c)
if not peer:
    for b in builds:
        binary = os.path.join(b, "spanfence")
        libs = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout.count("\n")
        cpu = []
        for _ in range(20):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            on_cpu(0)
            subprocess.run([binary, "--version"], stdout=subprocess.DEVNULL)
            on_cpu(1)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
        print(f"== {binary}: loading it and the {libs} shared libraries it links "
              f"(--version, CPU): {med(cpu)} ms")
