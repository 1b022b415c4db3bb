"""Time batch workloads over batch sizes and concurrency, keeping every sample.

Raw material for service-time laws S(k): what one batch of k requests costs on a device, alone
and with m copies running at once (Triton's instances on one GPU share it). Workloads:

- ``two_tower``: the recommender of the seed case study, a user tower and an item tower (MLPs
  256 -> 512 -> 256 -> 128 with ReLU) and a dot-product score per request;
- ``matmul``: a (k, 2048) by (2048, 2048) product;
- ``conv``: a 3x3 convolution, 16 -> 32 channels on 32x32 images, written as nine shifted
  tensor contractions so that NumPy and CuPy run the same code.

On a GPU (CuPy) each sample is the time between two CUDA events recorded on the batch's own
stream, so it covers the kernels and not the Python that launched them; concurrency m launches
the batch on m non-blocking streams and takes each stream's time. On a CPU (NumPy) a sample is
wall-clock time of the call, m threads at once. Warm-up calls are discarded.

Output: JSON with the device, library versions, the workload's shape, and
``samples[m][k]`` (seconds). Run on a GPU machine:
``python benchmarks/kernel_timings.py --backend cupy --out benchmarks/results/FILE.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import threading
import time
from pathlib import Path

import numpy as np

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def two_tower(xp, rng):
    dims = (256, 512, 256, 128)
    towers = [[xp.asarray(rng.standard_normal((a, b), dtype=np.float32) / np.sqrt(a))
               for a, b in zip(dims, dims[1:])] for _ in range(2)]

    def mlp(x, weights):
        for w in weights:
            x = xp.maximum(x @ w, 0)
        return x

    def run(k, inputs):
        user, item = inputs
        return (mlp(user[:k], towers[0]) * mlp(item[:k], towers[1])).sum(axis=1)

    def inputs(kmax):
        return [xp.asarray(rng.standard_normal((kmax, dims[0]), dtype=np.float32))
                for _ in range(2)]
    return run, inputs, {"tower_dims": list(dims)}


def matmul(xp, rng):
    n = 2048
    w = xp.asarray(rng.standard_normal((n, n), dtype=np.float32))

    def run(k, inputs):
        return inputs[0][:k] @ w

    def inputs(kmax):
        return [xp.asarray(rng.standard_normal((kmax, n), dtype=np.float32))]
    return run, inputs, {"inner": n, "outer": n}


def conv(xp, rng):
    cin, cout, side = 16, 32, 32
    w = xp.asarray(rng.standard_normal((3, 3, cin, cout), dtype=np.float32) / np.sqrt(9 * cin))

    def run(k, inputs):
        x = inputs[0][:k]                                  # (k, side + 2, side + 2, cin)
        out = 0
        for dy in range(3):
            for dx in range(3):
                out = out + xp.tensordot(x[:, dy:dy + side, dx:dx + side, :], w[dy, dx],
                                         axes=([3], [0]))
        return out

    def inputs(kmax):
        return [xp.asarray(rng.standard_normal((kmax, side + 2, side + 2, cin),
                                               dtype=np.float32))]
    return run, inputs, {"channels_in": cin, "channels_out": cout, "side": side}


WORKLOADS = {"two_tower": two_tower, "matmul": matmul, "conv": conv}


def gpu_samples(cp, run, inputs, k, m, repeats, warmup):
    streams = [cp.cuda.Stream(non_blocking=True) for _ in range(m)]
    out = []
    for i in range(warmup + repeats):
        events = []
        for s, data in zip(streams, inputs):
            with s:
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record(s)
                run(k, data)
                stop.record(s)
                events.append((start, stop))
        for s in streams:
            s.synchronize()
        if i >= warmup:
            out.extend(cp.cuda.get_elapsed_time(a, b) * 1e-3 for a, b in events)
    return out


def cpu_samples(run, inputs, k, m, repeats, warmup):
    out, lock = [], threading.Lock()

    def worker(data, keep):
        start = time.perf_counter()
        run(k, data)
        elapsed = time.perf_counter() - start
        if keep:
            with lock:
                out.append(elapsed)

    for i in range(warmup + repeats):
        threads = [threading.Thread(target=worker, args=(data, i >= warmup)) for data in inputs]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return out


def device_info(backend):
    if backend == "cupy":
        import cupy as cp
        props = cp.cuda.runtime.getDeviceProperties(0)
        return {"backend": "cupy", "device": props["name"].decode(),
                "cupy": cp.__version__, "cuda_runtime": cp.cuda.runtime.runtimeGetVersion(),
                "driver": cp.cuda.runtime.driverGetVersion()}
    return {"backend": "numpy", "device": platform.processor() or platform.machine(),
            "numpy": np.__version__}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--batch-sizes", default=",".join(map(str, BATCH_SIZES)))
    ap.add_argument("--concurrency", default="1,2,4")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.backend == "cupy":
        import cupy as xp
    else:
        xp = np
    sizes = [int(k) for k in args.batch_sizes.split(",")]
    levels = [int(m) for m in args.concurrency.split(",")]
    result = {"device": device_info(args.backend), "numpy": np.__version__,
              "repeats": args.repeats, "warmup": args.warmup, "workloads": {}}
    for name in args.workloads.split(","):
        rng = np.random.default_rng(0)
        run, make_inputs, shape = WORKLOADS[name](xp, rng)
        per_level = {}
        for m in levels:
            inputs = [make_inputs(max(sizes)) for _ in range(m)]
            per_k = {}
            for k in sizes:
                if args.backend == "cupy":
                    samples = gpu_samples(xp, run, inputs, k, m, args.repeats, args.warmup)
                else:
                    samples = cpu_samples(run, inputs, k, m, args.repeats, args.warmup)
                per_k[str(k)] = samples
                print(f"{name:9} m={m} k={k:4}  median {statistics.median(samples) * 1e6:9.1f} us"
                      f"  p99 {np.quantile(samples, 0.99) * 1e6:9.1f} us", flush=True)
            per_level[str(m)] = per_k
        result["workloads"][name] = {"shape": shape, "samples": per_level}
    args.out.write_text(json.dumps(result))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
