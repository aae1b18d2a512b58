"""What sampling each task's resources costs a run (issue 36): the goal is under 1%.

Run with ``python -m benchmarks.system_metrics_bench 3`` from the repository root.

1. and 2. The seed example (K = 1, the most hook calls per second) and the CNN of
   ``engine_bench`` row 9 (K = 20) as ``distloop run`` runs them, with the sampler and
   without it (``DISTLOOP_SYSTEM_METRICS=off``), interleaved, each pair in this one run:
   the ratio of their rates, the median over the rounds. On a shared two-core machine two
   runs of the same thing differ by a few percent, so this ratio bounds the cost coarsely;
3. what the sampler itself spends, measured directly and precisely: the CPU time of its
   thread per wall second (in this process, sampling it), and what the loop's side costs
   per execution (one call of the ``StepClock`` hook), as a share of the seed's step.
"""

from __future__ import annotations

import os
import queue
import statistics
import sys
import threading
import time
import timeit

import psutil
from distloop.engine.channel import Channel
from distloop.engine.loop import Executed
from distloop.engine.system_metrics import SWITCH_VARIABLE, Sampler, StepClock

from benchmarks.engine_bench import _project, cnn_project, engine_rate
from benchmarks.quick import sized

SEED_STEPS = sized(4000, 60)
SAMPLED_S = sized(20.0, 1.0)


def rates(project: dict, warmup: int, rounds: int) -> tuple[float, float, float]:
    """Median steps/s sampled and unsampled, and the median of the rounds' ratios."""
    on, off = [], []
    for _ in range(rounds):
        for store, switch in ((off, "off"), (on, "on")):
            os.environ[SWITCH_VARIABLE] = switch
            store.append(engine_rate(project, warmup)[0])
    os.environ.pop(SWITCH_VARIABLE, None)
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    return statistics.median(on), statistics.median(off), statistics.median(ratios)


def sampler_cpu_share(seconds: float) -> float:
    """CPU seconds the sampler's thread spends per wall second, as it runs in an engine."""
    clock = StepClock()
    sampler = Sampler(Channel(queue.Queue(), None, None), clock, None)
    before = {t.id for t in psutil.Process().threads()}
    sampler.start()
    native = next(t.id for t in psutil.Process().threads() if t.id not in before)
    began = time.monotonic()
    start = _thread_cpu(native)
    time.sleep(seconds)
    used = _thread_cpu(native) - start
    wall = time.monotonic() - began
    sampler.stop()
    return used / wall


def _thread_cpu(native_id: int) -> float:
    thread = next(t for t in psutil.Process().threads() if t.id == native_id)
    return thread.user_time + thread.system_time


def hook_cost_s() -> float:
    """Seconds one execution costs the loop's thread for the sampler (the StepClock hook)."""
    clock = StepClock()
    executed = Executed(1, 1, None, None, 0.0, step_s=0.001, input_wait_s=0.0002)
    calls = 200_000
    drained = threading.Event()

    def drain() -> None:  # the sampler takes what the hook keeps, as it would
        while not drained.wait(0.5):
            clock.take()

    threading.Thread(target=drain, daemon=True).start()
    cost = min(timeit.repeat(lambda: clock.after_steps(executed), number=calls, repeat=3))
    drained.set()
    return cost / calls


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    load = os.getloadavg()[0]
    print(f"machine: {os.cpu_count()} cores, load average {load:.1f} at the start")
    seed = _project("seed", {"training": {"steps": SEED_STEPS, "seed": 0}})
    on, off, ratio = rates(seed, warmup=sized(200, 10), rounds=rounds)
    seed_step_s = 1 / off
    print(
        f"1. seed, K = 1: {on:,.0f} steps/s sampled vs {off:,.0f} unsampled, "
        f"ratio {ratio:.3f} (median of {rounds} interleaved pairs)"
    )
    on, off, ratio = rates(cnn_project(), warmup=40, rounds=rounds)
    print(
        f"2. CNN, K = 20: {on:,.1f} steps/s sampled vs {off:,.1f} unsampled, "
        f"ratio {ratio:.3f} (median of {rounds} interleaved pairs)"
    )
    share = sampler_cpu_share(SAMPLED_S)
    hook = hook_cost_s()
    print(
        f"3. the sampler's thread: {share:.3%} of a core; the loop's hook: "
        f"{hook * 1e6:.2f} us per execution = {hook / seed_step_s:.3%} of the seed's "
        f"{seed_step_s * 1000:.2f} ms step"
    )
    print(f"machine load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
