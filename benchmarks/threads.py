"""Why the thread policy (params: runtime.torch_threads) defaults to 1 on small machines.

Times the same ops with 1 thread and with all cores, side by side in one run, on an idle machine and with
one core kept busy by another process (the usual case: a second stage, a helper process, a test run), and
prints time(all cores) / time(1 thread): above 1 means the extra threads cost time.
Last line: JSON (../shared/METRICS.md).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import time

import torch


def timed(fn, repeats: int = 50) -> float:
    """Median, not best: contention shows up as slow calls, which a minimum would hide."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def spin(stop) -> None:  # a busy process: what a second stage, a data loader or a test run does to a core
    while not stop.is_set():
        pass


def main() -> None:
    cores = os.cpu_count() or 1
    small = torch.randn(32, 16, 128)  # a tiny model's activations: one decoding step at batch 32
    large = torch.randn(32, 128, 128)  # a training batch
    w = torch.randn(128, 512)
    ops = {
        "elementwise_small": lambda: torch.nn.functional.gelu(small) + small * 0.5,
        "elementwise_large": lambda: torch.nn.functional.gelu(large) + large * 0.5,
        "matmul_large": lambda: large @ w,
    }
    figures: dict[str, float] = {"cores": cores}
    for load in ("idle", "one_core_busy"):
        stop = mp.Event()
        busy = mp.Process(target=spin, args=(stop,)) if load != "idle" else None
        if busy:
            busy.start()
            time.sleep(0.5)
        try:
            for name, fn in ops.items():
                torch.set_num_threads(1)
                one = timed(fn)
                torch.set_num_threads(cores)
                many = timed(fn)
                ratio = many / one
                print(
                    f"[{load:>13}] {name:>18}: 1 thread {one * 1e3:8.3f} ms, {cores} threads "
                    f"{many * 1e3:8.3f} ms, ratio {ratio:.2f}"
                )
                figures[f"{load}_{name}_ratio_many_over_one"] = round(ratio, 3)
        finally:
            stop.set()
            if busy:
                busy.join()
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
