"""Start-up benchmark (issue 14): Run click to first step in the window, cold vs warm engine.

Run with ``python -m benchmarks.startup_bench [ROUNDS]`` from the repository root
(offscreen Qt; Linux, for reading a process's CPU time from /proc). Each round
runs the seed example twice through real windows and real engine processes:

- cold: the window starts a fresh engine process, which imports TensorFlow first
  (what every run paid before warm engines);
- warm: the window hands the run to its warm engine, which imported TensorFlow
  beforehand and sits idle (the benchmark waits until it is).

Measured from ``MainWindow.run`` (what the Run button calls) to the first step's
metrics reaching the window. The cold run goes first in each round, while the warm
engine sits idle, so the two never compete for the CPU.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from distloop.engine.run_events import StepsAdded

from benchmarks.quick import sized

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

IDLE_CPU_S = 0.02
"""A warm engine that used less CPU than this over :data:`IDLE_WINDOW_S` has loaded."""
IDLE_WINDOW_S = 0.5
LOAD_TIMEOUT_S = 120.0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def until_idle(pid: int) -> None:
    """Waits until the process stops using the CPU: a warm engine done loading TensorFlow."""
    deadline = time.monotonic() + LOAD_TIMEOUT_S
    before = cpu_seconds(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(IDLE_WINDOW_S)
        now = cpu_seconds(pid)
        if now - before < IDLE_CPU_S:
            return
        before = now
    raise TimeoutError(f"the warm engine (pid {pid}) was still busy after {LOAD_TIMEOUT_S:.0f} s")


async def click_to_first_step(window) -> tuple[float, float]:
    """Seconds from Run to the first step in the window, and the CPU seconds the engine
    process spent in them (less moved by other load than the wall time); waits for the
    run to end."""
    first: list[float] = []
    engine_cpu: list[float] = []

    def on_change(_model: object, event: object) -> None:
        if isinstance(event, StepsAdded) and not first:
            first.append(time.perf_counter())
            engine_cpu.append(cpu_seconds(pid))

    window.controller.changed.connect(on_change)
    began = time.perf_counter()
    window.run()
    pid = window.controller.engine.pid
    cpu_before = cpu_seconds(pid)
    while window.controller.active:
        await asyncio.sleep(0.02)
    window.controller.changed.disconnect(on_change)
    if not first:
        raise RuntimeError(f"the run reported no step: {window.log_panel.lines()[-3:]}")
    return first[0] - began, engine_cpu[0] - cpu_before


def main() -> None:
    import qasync
    from distloop.engine.process import WarmEngines
    from distloop.gui.shell.main_window import MainWindow
    from PySide6.QtWidgets import QApplication

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else sized(3, 1)
    app = QApplication.instance() or QApplication([])
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    warm_engines = WarmEngines()
    with tempfile.TemporaryDirectory() as tmp:
        cold_window = MainWindow(runs_root=Path(tmp) / "cold")
        warm_window = MainWindow(runs_root=Path(tmp) / "warm", warm_engines=warm_engines)
        for window in (cold_window, warm_window):
            window.show()

        async def measure() -> tuple[list, list, list[float]]:
            cold: list[tuple[float, float]] = []
            warm: list[tuple[float, float]] = []
            loads: list[float] = []  # the 1-minute load average as each round began
            for _ in range(rounds):
                while warm_engines.warm is None:
                    await asyncio.sleep(0.05)
                await until_idle(warm_engines.warm.child.pid)
                loads.append(os.getloadavg()[0])
                cold.append(await click_to_first_step(cold_window))
                warm.append(await click_to_first_step(warm_window))
            return cold, warm, loads

        with loop:
            cold, warm, loads = loop.run_until_complete(measure())
            for window in (cold_window, warm_window):
                window.close()
    load = os.getloadavg()[0]
    for name, times in (("cold", cold), ("warm", warm)):
        print(
            f"click to first step, {name}: {', '.join(f'{t:.2f}' for t, _ in times)} s; the "
            f"engine's CPU in them {', '.join(f'{c:.2f}' for _, c in times)} s"
        )
    print(f"load average as each round began: {', '.join(f'{x:.1f}' for x in loads)}")
    cold_median = statistics.median(t for t, _ in cold)
    warm_median = statistics.median(t for t, _ in warm)
    print(
        f"6. click to first step (seed example), median of {rounds}: warm {warm_median:.2f} s, "
        f"cold {cold_median:.2f} s, ratio {warm_median / cold_median:.2f} (goal: warm "
        f"under 1 s on a quiet machine, under 2 s at load 4); load average {load:.1f} on "
        f"{os.cpu_count()} cores"
    )


if __name__ == "__main__":
    main()
