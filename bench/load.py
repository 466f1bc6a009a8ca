"""Load and soak test (bench/load.sh runs it; so does tests/python/test_load.py, for 60 s).

One `tfdata dispatcher` and 8 `tfdata worker` processes on loopback; 64 readers start and stop
reads for SECONDS, half parallel_epochs, half distributed_epoch, and check every element; the
servers' RSS and open file descriptors are sampled along the way. Prints a report on stderr and
a JSON summary on stdout; exits 1 when a check fails.

    python bench/load.py --binary build/tfdata [--seconds 600]

The readers are threads, 16 in each of 4 Python processes (`--reader` mode of this file), not 64
`tfdata read` processes: 64 gRPC clients, each with its own threads and heap, would
measure the 2-core machine's scheduler more than the service. Iteration waits with the GIL
released, so the 16 threads of a process read concurrently; 4 processes keep the per-element
Python work (collecting and checking) from queueing on one GIL. Each reader is its own client
at the dispatcher either way.
"""
import argparse
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

WORKERS = 8
READERS = 64
READER_PROCS = 4
# The dispatcher keeps a released job for --job-gc-timeout (default 5 min) before the workers drop
# its tasks: with reads of a few seconds, 5 min of them would pile up thousands of live tasks.
# 5 s keeps the state to what the last seconds of reads left. --client-timeout releases a reader
# that stopped heartbeating (every 200 ms; a killed reader process) after 10 s instead of 5 min.
JOB_GC_TIMEOUT = "5s"
CLIENT_TIMEOUT = "10s"
READ_TIMEOUT = 120.0  # a read taking longer is an error (one takes a few seconds under full load)
# Growth allowed between the start sample (after warm-up) and the end one, per server process.
# RSS: 20 % + 16 MiB. glibc keeps freed memory in its per-thread arenas and (tfdata's mallopt)
# trims only above 256 MiB free, so RSS moves by several MiB with which threads happened to
# allocate; a leak of 1 KiB per read (~35 k reads in 10 min on 2 cores) would still cross it.
RSS_GROWTH = (0.20, 16 << 20)
# fds: a server has one connection per reader process (gRPC shares it between the process's
# channels), so under load the count is flat; idle (before the readers start, and after they
# have gone and their jobs were collected) it must come back to where it was.
FD_GROWTH_LOADED = 8
FD_GROWTH_IDLE = 4

# A fixed set of pipelines: registering one again returns its dataset id, and the dispatcher
# never forgets a dataset, so random sizes would grow its registry for the whole run. Each is a
# range whose element i comes out as a * i + b (in batches or not), which makes checking simple.
SIZES = (1000, 2000, 3000)


def pipelines():
    from tfdata import Pipeline, fn
    out = []
    for n in SIZES:
        out += [
            (f"range({n})", Pipeline.range(n), n, 1, 0),
            (f"range({n}).map(add)", Pipeline.range(n).map(fn.arith("add", 1_000_000)), n, 1, 1_000_000),
            (f"range({n}).batch(50)", Pipeline.range(n).batch(50), n, 1, 0),
            (f"range({n}).map(mul).batch(100)", Pipeline.range(n).map(fn.arith("mul", 3)).batch(100), n, 3, 0),
            (f"range({n}).shuffle.batch(64)",
             Pipeline.range(n).shuffle(500, seed=7).batch(64).prefetch(2), n, 1, 0),
        ]
    return out


# ---------------------------------------------------------------------------------------------
# Reader process: --reader


def reader_main(args):
    import warnings

    import numpy as np

    import tfdata

    # A read that lost data ends with a DataLossWarning: here it is an error (no faults are made).
    warnings.simplefilter("error", tfdata.DataLossWarning)
    pipes = pipelines()
    t_start = time.monotonic()
    lock = threading.Lock()
    totals = {"reads": 0, "complete": 0, "early": 0, "elements": 0, "errors": 0, "duplicates": 0,
              "missing": 0, "max_read_seconds": 0.0, "reads_per_30s": [],
              "by_mode": {m: {"reads": 0, "elements": 0} for m in ("parallel_epochs", "distributed_epoch")}}
    messages = []

    def error(text):
        with lock:
            totals["errors"] += 1
            if len(messages) < 20:
                messages.append(text)

    def one_read(rng):
        mode = rng.choice(("parallel_epochs", "distributed_epoch"))
        name, pipeline, n, a, b = rng.choice(pipes)
        copies = WORKERS if mode == "parallel_epochs" else 1
        # Every fifth read stops early, at a random element, and closes its iterator.
        stop_at = rng.randrange(1, n * copies) if rng.random() < 0.2 else None
        dataset_id = tfdata.register_dataset(args.dispatcher, pipeline)
        start = time.monotonic()
        values = []
        count = 0
        it = iter(tfdata.from_dataset_id(mode, args.dispatcher, dataset_id))
        try:
            for element in it:
                values.append(element)
                count += element.size if isinstance(element, np.ndarray) else 1
                if stop_at is not None and count >= stop_at:
                    break
                if time.monotonic() > args.deadline:  # the run is over: stop here too
                    stop_at = count
                    break
                if time.monotonic() - start > READ_TIMEOUT:
                    raise TimeoutError(f"{mode} {name}: read still going after {READ_TIMEOUT:.0f} s")
            stats = it.stats()
        finally:
            it.close()
        seconds = time.monotonic() - start
        if stats["tasks_dropped"] or stats["splits_lost"]:
            error(f"{mode} {name}: {stats}")
        flat = np.concatenate([np.atleast_1d(np.asarray(v)) for v in values]) if values else np.zeros(0, np.int64)
        ids, rem = np.divmod(flat - b, a)
        if (rem != 0).any() or (ids < 0).any() or (ids >= n).any():
            error(f"{mode} {name}: values outside the pipeline's: {flat[(rem != 0) | (ids < 0) | (ids >= n)][:5]}")
            ids = ids[(rem == 0) & (ids >= 0) & (ids < n)]
        counts = np.bincount(ids, minlength=n)
        duplicates = int(np.maximum(counts - copies, 0).sum())
        missing = 0 if stop_at is not None else int(np.maximum(copies - counts, 0).sum())
        if duplicates or missing:
            error(f"{mode} {name}: {duplicates} duplicate(s), {missing} missing; stats {stats}")
        with lock:
            totals["reads"] += 1
            totals["complete" if stop_at is None else "early"] += 1
            totals["elements"] += int(flat.size)
            totals["duplicates"] += duplicates
            totals["missing"] += missing
            totals["max_read_seconds"] = max(totals["max_read_seconds"], seconds)
            # Reads finished per 30 s of the run: a service slowing down shows here.
            bucket = int((time.monotonic() - t_start) // 30)
            per = totals["reads_per_30s"]
            per.extend([0] * (bucket + 1 - len(per)))
            per[bucket] += 1
            totals["by_mode"][mode]["reads"] += 1
            totals["by_mode"][mode]["elements"] += int(flat.size)

    def loop(seed):
        rng = random.Random(seed)
        while time.monotonic() < args.deadline:
            try:
                one_read(rng)
            except Exception as e:  # tfdata errors, DataLossWarning, TimeoutError
                error(f"{type(e).__name__}: {e}")
                time.sleep(0.5)  # do not spin on a persistent error

    threads = [threading.Thread(target=loop, args=(args.seed * 1000 + i,)) for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    totals["messages"] = messages
    print(json.dumps(totals))


# ---------------------------------------------------------------------------------------------
# Driver


def sample(pids):
    """{name: (VmRSS bytes, open fds, CPU seconds so far)} of each server process."""
    out = {}
    for name, pid in pids.items():
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
        with open(f"/proc/{pid}/stat") as f:
            utime, stime = f.read().rsplit(")", 1)[1].split()[11:13]
        cpu = (int(utime) + int(stime)) / os.sysconf("SC_CLK_TCK")
        out[name] = (rss, len(os.listdir(f"/proc/{pid}/fd")), cpu)
    return out


def idle_cpu(pids, seconds=3.0):
    """A sample of the idle cluster, with the dispatcher's CPU use in that state (CPU seconds per
    second: the workers' heartbeats only), to compare before and after the load."""
    s0 = sample(pids)
    time.sleep(seconds)
    s1 = sample(pids)
    return {**s1, "dispatcher_idle_cpu": (s1["dispatcher"][2] - s0["dispatcher"][2]) / seconds}


def wait_for_file(path, proc, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args[1]} exited with {proc.returncode} before writing {path}")
        if os.path.exists(path) and open(path).read().strip():
            return open(path).read().strip()
        time.sleep(0.05)
    raise RuntimeError(f"{path} did not appear in {timeout:.0f} s")


def driver_main(args):
    warmup = min(30.0, max(10.0, args.seconds / 10))
    tmp = tempfile.mkdtemp(prefix="tfdata-load-")
    servers = {}

    def start(name, argv):
        log = open(os.path.join(tmp, f"{name}.log"), "w")
        servers[name] = subprocess.Popen([args.binary] + argv + ["--log-level", "warn"],
                                         stdout=subprocess.DEVNULL, stderr=log)

    readers = []
    try:
        start("dispatcher", ["dispatcher", "--host", "127.0.0.1", "--port", "0", "--port-file", f"{tmp}/d.port",
                             "--job-gc-timeout", JOB_GC_TIMEOUT, "--client-timeout", CLIENT_TIMEOUT])
        addr = "127.0.0.1:" + wait_for_file(f"{tmp}/d.port", servers["dispatcher"])
        for i in range(WORKERS):
            # 100 ms heartbeats: a new job reaches the workers within 0.1 s (reads are short).
            start(f"worker{i}", ["worker", "--dispatcher", addr, "--host", "127.0.0.1", "--port", "0",
                                 "--worker-address", "127.0.0.1:%port%", "--port-file", f"{tmp}/w{i}.port",
                                 "--heartbeat-interval", "100ms"])
        for i in range(WORKERS):
            wait_for_file(f"{tmp}/w{i}.port", servers[f"worker{i}"])
        # Until a parallel_epochs read gets its elements 8 times, not every worker is registered.
        with open(f"{tmp}/p.pbtxt", "w") as f:
            f.write("op { range { stop: 100 } }")
        deadline = time.monotonic() + 30
        while True:
            out = subprocess.run([args.binary, "read", "--dispatcher", addr, f"{tmp}/p.pbtxt", "--mode",
                                  "parallel_epochs", "--log-level", "error"], capture_output=True, text=True)
            if out.returncode == 0 and len(out.stdout.split()) == 100 * WORKERS:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"the {WORKERS} workers did not all serve a read in 30 s: {out.stderr}")
            time.sleep(0.2)
        pids = {name: p.pid for name, p in servers.items()}
        time.sleep(6)  # the warm-up read's job is collected (5 s): the cluster is idle
        idle_before = idle_cpu(pids)

        t0 = time.monotonic()
        end = time.time() + args.seconds
        for i in range(READER_PROCS):
            readers.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--reader", "--dispatcher", addr, "--seed", str(i),
                 "--threads", str(READERS // READER_PROCS), "--deadline-epoch", str(end)],
                stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, f"reader{i}.log"), "w"), text=True))
        series = []  # (seconds, {name: (rss, fds)}) every 5 s, under load
        start_sample = None
        while time.time() < end - 1:
            time.sleep(min(5.0, max(0.0, end - 1 - time.time())))
            s = sample(pids)
            series.append((round(time.monotonic() - t0, 1), s))
            if start_sample is None and time.monotonic() - t0 >= warmup:
                start_sample = series[-1]
        end_sample = series[-1]
        if start_sample is None:
            start_sample = series[0]
        # Readers finish their current read by the deadline (they stop it early there).
        results = []
        reader_failures = []
        for i, r in enumerate(readers):
            try:
                stdout, _ = r.communicate(timeout=READ_TIMEOUT + 30)
            except subprocess.TimeoutExpired:
                r.kill()
                stdout, _ = r.communicate()
                reader_failures.append(f"reader process {i} did not finish in time (killed)")
            if r.returncode == 0 and stdout.strip():
                results.append(json.loads(stdout.strip().splitlines()[-1]))
            elif r.returncode != 0:
                reader_failures.append(f"reader process {i} exited {r.returncode} (see {tmp}/reader{i}.log)")
        elapsed = time.monotonic() - t0
        time.sleep(8)  # released jobs collected (5 s) and the workers told so (next heartbeat)
        idle_after = idle_cpu(pids)
        crashed = [name for name, p in servers.items() if p.poll() is not None]
    finally:
        for r in readers:
            if r.poll() is None:
                r.kill()
        # Workers first (each tells the dispatcher it leaves), then the dispatcher.
        for name, p in servers.items():
            if name != "dispatcher" and p.poll() is None:
                p.terminate()
        for name, p in servers.items():
            if name != "dispatcher":
                p.wait(timeout=30)
        if "dispatcher" in servers and servers["dispatcher"].poll() is None:
            servers["dispatcher"].terminate()
            servers["dispatcher"].wait(timeout=30)

    exit_codes = {name: p.returncode for name, p in servers.items()}
    total = {k: sum(r[k] for r in results) for k in ("reads", "complete", "early", "elements", "errors",
                                                      "duplicates", "missing")}
    by_mode = {m: {k: sum(r["by_mode"][m][k] for r in results) for k in ("reads", "elements")}
               for m in ("parallel_epochs", "distributed_epoch")}
    messages = [m for r in results for m in r["messages"]]
    per_process = {}
    failures = list(reader_failures)
    for name in pids:
        (rss0, fd0, _), (rss1, fd1, _) = start_sample[1][name], end_sample[1][name]
        per_process[name] = {"rss_start": rss0, "rss_end": rss1, "fds_start": fd0, "fds_end": fd1,
                             "fds_idle_before": idle_before[name][1], "fds_idle_after": idle_after[name][1],
                             "rss_idle_after": idle_after[name][0],
                             "rss_growth_per_read": round((rss1 - rss0) / max(1, total["reads"]))}
        if rss1 > rss0 * (1 + RSS_GROWTH[0]) + RSS_GROWTH[1]:
            failures.append(f"{name}: RSS grew from {rss0 >> 20} to {rss1 >> 20} MiB")
        if fd1 > fd0 + FD_GROWTH_LOADED:
            failures.append(f"{name}: fds grew from {fd0} to {fd1} under load")
        if idle_after[name][1] > idle_before[name][1] + FD_GROWTH_IDLE:
            failures.append(f"{name}: idle fds grew from {idle_before[name][1]} to {idle_after[name][1]}")
    for k in ("errors", "duplicates", "missing"):
        if total[k]:
            failures.append(f"{total[k]} {k}")
    if not results or total["reads"] == 0:
        failures.append("no reads")
    if crashed:
        failures.append(f"exited during the run: {crashed}")
    bad_exits = {n: c for n, c in exit_codes.items() if c != 0 and n not in crashed}
    if bad_exits:
        failures.append(f"non-zero exit on SIGTERM: {bad_exits}")
    summary = {
        "seconds": args.seconds, "elapsed": round(elapsed, 1), "warmup": warmup,
        "start_at": start_sample[0], "end_at": end_sample[0], "workers": WORKERS, "readers": READERS,
        **total, "by_mode": by_mode,
        "max_read_seconds": round(max((r["max_read_seconds"] for r in results), default=0), 2),
        "processes": per_process, "messages": messages[:20], "failures": failures, "ok": not failures,
        "reads_per_30s": [sum(col) for col in itertools.zip_longest(*(r["reads_per_30s"] for r in results),
                                                                    fillvalue=0)],
        # Every 5 s under load: RSS and fds, and CPU seconds used since the previous sample.
        "series": [(t, {"dispatcher_rss": s["dispatcher"][0],
                        "workers_rss": sum(v[0] for n, v in s.items() if n != "dispatcher"),
                        "dispatcher_fds": s["dispatcher"][1],
                        "workers_fds": sum(v[1] for n, v in s.items() if n != "dispatcher"),
                        "dispatcher_cpu": round(s["dispatcher"][2] - prev["dispatcher"][2], 2),
                        "workers_cpu": round(sum(v[2] - prev[n][2] for n, v in s.items() if n != "dispatcher"), 2)})
                   for (t, s), (_, prev) in zip(series, [(0, idle_before)] + series)],
        "dispatcher_idle_cpu_before": round(idle_before["dispatcher_idle_cpu"], 4),
        "dispatcher_idle_cpu_after": round(idle_after["dispatcher_idle_cpu"], 4),
        "logs": tmp,
    }
    report(summary)
    print(json.dumps(summary))
    return 0 if not failures else 1


def report(s):
    p = lambda *a: print(*a, file=sys.stderr)  # noqa: E731
    p(f"load: {s['readers']} readers, {s['workers']} workers, {s['seconds']:.0f} s "
      f"(start sample at {s['start_at']} s, end at {s['end_at']} s)")
    p(f"reads {s['reads']} ({s['complete']} whole, {s['early']} stopped early; "
      f"parallel_epochs {s['by_mode']['parallel_epochs']['reads']}, "
      f"distributed_epoch {s['by_mode']['distributed_epoch']['reads']}), elements {s['elements']}, "
      f"errors {s['errors']}, duplicates {s['duplicates']}, missing {s['missing']}, "
      f"longest read {s['max_read_seconds']} s")
    p(f"{'process':<11} {'RSS start':>10} {'RSS end':>10} {'fds start':>9} {'fds end':>8} "
      f"{'idle fds before':>15} {'after':>6}")
    for name, v in s["processes"].items():
        p(f"{name:<11} {v['rss_start'] / 2**20:>6.1f} MiB {v['rss_end'] / 2**20:>6.1f} MiB {v['fds_start']:>9} "
          f"{v['fds_end']:>8} {v['fds_idle_before']:>15} {v['fds_idle_after']:>6}")
    p(f"RSS growth per read, bytes: " + ", ".join(f"{n} {v['rss_growth_per_read']}" for n, v in s["processes"].items()))
    p(f"reads per 30 s: {s['reads_per_30s']}")
    p(f"dispatcher CPU when idle, before and after: {s['dispatcher_idle_cpu_before']:.1%} "
      f"{s['dispatcher_idle_cpu_after']:.1%} of a core")
    cpu = [(t, v["dispatcher_cpu"]) for t, v in s["series"]]
    p(f"dispatcher CPU seconds per 5 s, first and last: {cpu[:3]} ... {cpu[-3:]}")
    for m in s["messages"]:
        p("  error:", m)
    p("OK" if s["ok"] else "FAILED: " + "; ".join(s["failures"]))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", default=os.environ.get("TFDATA_BINARY", "build/tfdata"))
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--reader", action="store_true", help="internal: run reader threads")
    parser.add_argument("--dispatcher")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=READERS // READER_PROCS)
    parser.add_argument("--deadline-epoch", type=float)
    args = parser.parse_args()
    if args.reader:
        # The driver's wall-clock deadline, as this process's monotonic clock.
        args.deadline = time.monotonic() + (args.deadline_epoch - time.time())
        reader_main(args)
        return 0
    return driver_main(args)


if __name__ == "__main__":
    sys.exit(main())
