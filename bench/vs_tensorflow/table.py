"""Turns bench/vs_tensorflow.sh's measurements (lines: key, run, elements/s, bytes/s) into the
markdown table of docs/performance.md: each figure as a range over the runs, and each ratio
computed run by run (the two systems ran one after the other in each run) and given as a range.

    python3 table.py RESULTS
"""
import math
import sys
from collections import defaultdict


def load(path):
    values = defaultdict(dict)  # key -> run -> (elements/s, bytes/s)
    for line in open(path):
        key, run, eps, bps = line.rstrip("\n").split("\t")
        values[key][run] = (float(eps), float(bps))
    return values


def fmt(x, unit):
    if math.isnan(x):
        return "failed"
    if unit == "GB/s":
        return f"{x / 1e9:.2f}"
    for scale, suffix in ((1e6, " M"), (1e3, " k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def span(xs, unit):
    xs = [x for x in xs if not math.isnan(x)]
    if not xs:
        return "failed"
    lo, hi = min(xs), max(xs)
    return fmt(lo, unit) if fmt(lo, unit) == fmt(hi, unit) else f"{fmt(lo, unit)}–{fmt(hi, unit)}"


def ratio_span(a, b, index):
    rs = [a[r][index] / b[r][index] for r in a if r in b and b[r][index] > 0 and not math.isnan(a[r][index])]
    if not rs:
        return "–"
    lo, hi = min(rs), max(rs)

    def r(x):  # two significant digits at least; no decimals in the hundreds
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"

    return f"{r(lo)}x" if r(lo) == r(hi) else f"{r(lo)}–{r(hi)}x"


def main():
    v = load(sys.argv[1])

    def row(label, ours, theirs, unit):
        index = 1 if unit == "GB/s" else 0
        if ours not in v or theirs not in v:
            return
        print(f"| {label} | {span([x[index] for x in v[theirs].values()], unit)} | "
              f"{span([x[index] for x in v[ours].values()], unit)} | {ratio_span(v[ours], v[theirs], index)} |")

    print("Data plane, one worker process to one reader process (steady state). Ratio: tfdata / TF.\n")
    print("| what | TensorFlow | tfdata | ratio |")
    print("|---|---:|---:|---:|")
    for size, unit in (("service_1mib_cached", "GB/s"), ("service_scalars", "elements/s")):
        name = "1 MiB elements" if size == "service_1mib_cached" else "scalars"
        u = "GB/s" if unit == "GB/s" else "elements/s"
        row(f"{name} ({u}), no compression: C++ reader, gRPC", f"{size}.cpp.grpc.none", f"{size}.tf.none", unit)
        row(f"{name} ({u}), no compression: C++ reader, shared memory", f"{size}.cpp.shm.none", f"{size}.tf.none", unit)
        row(f"{name} ({u}), no compression: Python client, gRPC", f"{size}.py.grpc.none", f"{size}.tf.none", unit)
        row(f"{name} ({u}), no compression: Python client, shared memory", f"{size}.py.shm.none", f"{size}.tf.none",
            unit)
    row("1 MiB elements (GB/s), TF AUTO vs snappy: C++ reader, gRPC", "service_1mib_cached.cpp.grpc.snappy",
        "service_1mib_cached.tf.auto", "GB/s")
    row("1 MiB elements (GB/s), TF AUTO vs auto: C++ reader, gRPC", "service_1mib_cached.cpp.grpc.auto",
        "service_1mib_cached.tf.auto", "GB/s")
    row("1 MiB elements (GB/s), TF AUTO vs snappy: Python client, gRPC", "service_1mib_cached.py.grpc.snappy",
        "service_1mib_cached.tf.auto", "GB/s")
    row("scalars (elements/s), distributed_epoch: C++ reader, gRPC", "service_scalars.cpp.grpc.dynamic",
        "service_scalars.tf.dynamic", "elements/s")
    row("scalars (elements/s), distributed_epoch: C++ reader, shared memory", "service_scalars.cpp.shm.dynamic",
        "service_scalars.tf.dynamic", "elements/s")
    row("scalars (elements/s), distributed_epoch: Python client, gRPC", "service_scalars.py.grpc.dynamic",
        "service_scalars.tf.dynamic", "elements/s")
    if "iperf3" in v:
        # Against the ceiling: each figure over the lowest and the highest iperf3 of the run.
        ceilings = [x[1] for x in v["iperf3"].values()]
        for key, label in (("service_1mib_cached.cpp.grpc.none", "tfdata gRPC"),
                           ("service_1mib_cached.py.grpc.none", "tfdata Python client, gRPC"),
                           ("service_1mib_cached.cpp.shm.none", "tfdata shared memory"),
                           ("service_1mib_cached.tf.none", "TF's service")):
            figures = [x[1] for x in v.get(key, {}).values() if not math.isnan(x[1])]
            if figures:
                print(f"\n1 MiB, {label} against iperf3 loopback ({span(ceilings, 'GB/s')} GB/s): "
                      f"{min(figures) / max(ceilings):.0%}–{max(figures) / min(ceilings):.0%}")

    print("\ndistributed_epoch against parallel_epochs, scalars (ratio of elements/s, run by run):\n")
    print("| system | distributed_epoch / parallel_epochs |")
    print("|---|---:|")
    for label, dyn, par in (("TensorFlow", "service_scalars.tf.dynamic", "service_scalars.tf.none"),
                            ("tfdata C++ reader, gRPC", "service_scalars.cpp.grpc.dynamic",
                             "service_scalars.cpp.grpc.none"),
                            ("tfdata C++ reader, shared memory", "service_scalars.cpp.shm.dynamic",
                             "service_scalars.cpp.shm.none"),
                            ("tfdata Python client, gRPC", "service_scalars.py.grpc.dynamic",
                             "service_scalars.py.grpc.none")):
        if dyn in v and par in v:
            print(f"| {label} | {ratio_span(v[dyn], v[par], 0)} |")

    print("\nThe pipeline engine in process (elements/s). Ratio: tfdata / tf.data.\n")
    print("| pipeline | tf.data | tfdata | ratio |")
    print("|---|---:|---:|---:|")
    for p, label in (("range_batch", "range + batch(1024)"),
                     ("tfrecord_parse_p1", "TFRecord + parse_example, 1 thread"),
                     ("tfrecord_parse_p2", "TFRecord + parse_example, 2 threads"),
                     ("jpeg_resize_p1", "+ decode_jpeg + resize(224), 1 thread"),
                     ("jpeg_resize_p2", "+ decode_jpeg + resize(224), 2 threads")):
        row(label, f"{p}.ours", f"{p}.tf", "elements/s")

    print("\nScaling on a latency-bound map (2 ms per element; elements/s through the service):\n")
    print("| workers | TensorFlow | tfdata | ratio |")
    print("|---|---:|---:|---:|")
    for n in (1, 2, 4, 8):
        row(str(n), f"sleep_2ms.w{n}.ours", f"sleep_2ms.w{n}.tf", "elements/s")


if __name__ == "__main__":
    main()
