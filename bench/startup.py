#!/usr/bin/python3
# bench/startup.py: start-up and idle memory of the collector. Prints the time
# from launching it to its OTLP/gRPC port accepting a connection (median and
# range of RUNS starts), the CPU a bare load of the binary costs (`--version`:
# the dynamic loader and the libraries' constructors, nothing of spanfence's
# own start), and the idle RSS split into anonymous memory and the
# shared-library pages touched, by library (/proc/<pid>/smaps).
#
#   /usr/bin/python3 bench/startup.py [RUNS=10]
#   BUILD=build                        the build directory
#   SF_BENCH_COLLECTOR="cmd args..."   another collector, listening for
#       OTLP/gRPC on 127.0.0.1:$SF_BENCH_GRPC_PORT (no --version row then)
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
import time

os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 10
build = os.environ.get("BUILD", "build")
for k, v in (("SF_BENCH_GRPC_PORT", "14317"), ("SF_BENCH_SINK_PORT", "14319"),
             ("SF_BENCH_METRICS_PORT", "18888")):
    os.environ.setdefault(k, v)
port = int(os.environ["SF_BENCH_GRPC_PORT"])
peer = os.environ.get("SF_BENCH_COLLECTOR", "")
cmd = shlex.split(peer) if peer else [os.path.join(build, "spanfence"), "--config",
                                      "bench/configs/pipeline.yaml"]
pin = os.environ.get("SF_BENCH_PIN", "1") == "1" and os.cpu_count() >= 2


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


if listening():
    sys.exit(f"startup.py: something already listens on port {port}")
times, smaps, rollup = [], "", ""
for _ in range(runs):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=pinned)
    while not listening():
        if p.poll() is not None or time.monotonic() - t0 > 10:
            sys.exit("startup.py: the collector never listened on port %d" % port)
        time.sleep(0.0002)
    times.append((time.monotonic() - t0) * 1000)
    time.sleep(0.3)
    smaps = open(f"/proc/{p.pid}/smaps").read()
    rollup = open(f"/proc/{p.pid}/smaps_rollup").read()
    p.terminate()
    p.wait()
    while listening():          # the port is free again before the next start
        time.sleep(0.01)

print(f"== start to listening ({' '.join(cmd)}; pinning: "
      f"{'collector on CPU 0, this script on CPU 1' if pin else 'none'})")
print(f"  {statistics.median(times):.1f} ms median, range {min(times):.1f}-{max(times):.1f} ms, "
      f"{runs} starts")
if not peer:
    libs = subprocess.run(["ldd", cmd[0]], capture_output=True, text=True).stdout.count("\n")
    cpu = []
    for _ in range(20):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([cmd[0], "--version"], stdout=subprocess.DEVNULL, preexec_fn=pinned)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append((r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime) * 1000)
    print(f"  of which loading the binary and its {libs} shared libraries (--version, CPU): "
          f"{statistics.median(cpu):.1f} ms median")
kib = {l.split(":")[0]: int(l.split()[1]) for l in rollup.splitlines()[1:] if l.endswith("kB")}
print("== idle memory")
print(f"  RSS {kib['Rss'] / 1024:.1f} MiB: {kib['Anonymous'] / 1024:.1f} MiB anonymous, "
      f"{(kib['Rss'] - kib['Anonymous']) / 1024:.1f} MiB file-backed "
      f"({kib['Pss_File'] / 1024:.1f} MiB of it PSS)")
by = collections.Counter()
name = ""
for line in smaps.splitlines():
    f = line.split()
    if "-" in f[0] and len(f) >= 5 and not f[0].endswith(":"):
        name = f[5] if len(f) > 5 else ""
    elif f[0] == "Rss:" and name.startswith("/"):
        by[name] += int(f[1])
print("  RSS by library (KiB, the largest: code and read-only data touched, and its relocated data):")
for n, k in by.most_common(12):
    print(f"  {k:8d}  {n}")
