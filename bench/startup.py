#!/usr/bin/python3
# bench/startup.py: start-up and idle memory of the collector. For each
# config, prints the time from launching it to its OTLP/gRPC port accepting a
# connection (median and range of RUNS starts) and the CPU its threads ran
# until then (/proc/<pid>/task/*/schedstat), the idle RSS of the same
# starts (median and range, 0.3 s after listening), split into anonymous
# memory (heap, thread stacks, the rest) and the file-backed pages touched by
# library (/proc/<pid>/smaps of the last start), the threads, and once the
# CPU a bare load of the binary costs (`--version`: the dynamic loader and
# the libraries' constructors, nothing of spanfence's own start).
#
#   /usr/bin/python3 bench/startup.py [RUNS=10] [CONFIG...]
#   CONFIG: bench    bench/configs/pipeline.yaml (OTLP/gRPC in, OTLP/HTTP out; the default)
#           default  configs/default.yaml, the README's first command (OTLP in, debug out)
#           cvm      configs/cvm.yaml, the production config (OTLP, prometheus and
#                    journald in, two OTLP/HTTP exporters to a gateway that is not there)
#           each with its ports moved to the SF_BENCH_* ones below
#   BUILD=build                        the build directory
#   SF_BENCH_COLLECTOR="cmd args..."   another collector, listening for
#       OTLP/gRPC on 127.0.0.1:$SF_BENCH_GRPC_PORT (CONFIG ignored, no --version row)
#   SF_BENCH_PIN=1|0                   the collector on CPU 0, this script on
#       CPU 1 (default 1 with 2 CPUs or more)
import collections
import os
import resource
import shlex
import socket
import statistics
import subprocess
import sys
import tempfile
import time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
configs = sys.argv[2:] or ["bench"]
build = os.environ.get("BUILD", "build")
for k, v in (("SF_BENCH_GRPC_PORT", "14317"), ("SF_BENCH_SINK_PORT", "14319"),
             ("SF_BENCH_METRICS_PORT", "18888"), ("SF_BENCH_HTTP_PORT", "14318")):
    os.environ.setdefault(k, v)
port = int(os.environ["SF_BENCH_GRPC_PORT"])
peer = os.environ.get("SF_BENCH_COLLECTOR", "")
pin = os.environ.get("SF_BENCH_PIN", "1") == "1" and os.cpu_count() >= 2
binary = os.path.join(build, "spanfence")
tmp = tempfile.mkdtemp(prefix="sf-startup-")


def command(name):
    """The command line and extra environment of one config."""
    e = os.environ
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


def pinned():
    if pin:
        os.sched_setaffinity(0, {0})


if pin:
    os.sched_setaffinity(0, {1})


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


def measure(name):
    cmd, extra = (shlex.split(peer), {}) if peer else command(name)
    env = dict(os.environ, **extra)
    times, cpu, rss, smaps, kib, threads = [], [], [], "", {}, 0
    for _ in range(runs):
        if listening():
            sys.exit(f"startup.py: something already listens on port {port}")
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             preexec_fn=pinned, env=env)
        while not listening():
            if p.poll() is not None or time.monotonic() - t0 > 10:
                sys.exit(f"startup.py: the collector never listened on port {port} "
                         f"({' '.join(cmd)})")
            time.sleep(0.0002)
        times.append((time.monotonic() - t0) * 1000)
        cpu.append(cpu_ms(p.pid))
        time.sleep(0.3)
        smaps = open(f"/proc/{p.pid}/smaps").read()
        kib = rollup(p.pid)
        rss.append(kib["Rss"] / 1024)
        threads = len(os.listdir(f"/proc/{p.pid}/task"))
        p.kill()                # idle figures only: no drain to wait for
        p.wait()
        while listening():      # the port is free again before the next start
            time.sleep(0.01)

    print(f"== {name if not peer else 'SF_BENCH_COLLECTOR'}: {' '.join(cmd)}")
    print(f"  start to listening: {statistics.median(times):.1f} ms median, range "
          f"{min(times):.1f}-{max(times):.1f} ms, {runs} starts (pinning: "
          f"{'collector on CPU 0, this script on CPU 1' if pin else 'none'})")
    print(f"  its CPU until listening: {statistics.median(cpu):.1f} ms median, range "
          f"{min(cpu):.1f}-{max(cpu):.1f} (the wall time above waits for a busy machine too)")
    print(f"  idle RSS: {statistics.median(rss):.1f} MiB median, range {min(rss):.1f}-{max(rss):.1f}; "
          f"the last: {kib['Anonymous'] / 1024:.1f} MiB anonymous, "
          f"{(kib['Rss'] - kib['Anonymous']) / 1024:.1f} MiB file-backed "
          f"({kib['Pss_File'] / 1024:.1f} MiB of it PSS), {threads} threads")
    by, anon = collections.Counter(), collections.Counter()
    name = size = 0
    for line in smaps.splitlines():
        f = line.split()
        if "-" in f[0] and len(f) >= 5 and not f[0].endswith(":"):
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            size, name = hi - lo, (f[5] if len(f) > 5 else "")
        elif f[0] == "Rss:" and name.startswith("/"):
            by[name] += int(f[1])    # a library's relocated (anonymous) pages count here too
        elif f[0] == "Anonymous:" and int(f[1]) and not name.startswith("/"):
            # a thread's stack is an 8 MiB (RLIMIT_STACK) mapping or one a
            # thread attribute sized; the heap is named; the rest is malloc's
            # other arenas, the PCRE2 JIT and libraries' mmaps
            kind = "heap" if name == "[heap]" else "main stack" if name == "[stack]" else \
                "thread stacks" if size >= 1 << 20 and size % (1 << 20) <= 8192 else "other"
            anon[kind] += int(f[1])
    print("  anonymous (KiB): " + ", ".join(f"{k} {v}" for k, v in anon.most_common()))
    print(f"  file-backed and relocated pages by object (KiB, the largest of "
          f"{len(by)} objects mapped):")
    for n, k in by.most_common(10):
        print(f"  {k:8d}  {n}")


for c in (configs if not peer else ["peer"]):
    measure(c)
if not peer:
    libs = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout.count("\n")
    cpu = []
    for _ in range(20):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([binary, "--version"], stdout=subprocess.DEVNULL, preexec_fn=pinned)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
    print(f"== loading the binary and the {libs} shared libraries it links (--version, CPU): "
          f"{statistics.median(cpu):.1f} ms median, range {min(cpu):.1f}-{max(cpu):.1f}")
