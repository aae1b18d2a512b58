"""The study views with a few hundred trials: does the window stay responsive?

Run with ``python -m benchmarks.study_views_bench [TRIALS]`` from the repository root
(offscreen Qt). A study folder of TRIALS trials (default 300; Optuna's SQLite storage,
each trial with a run folder of 200 steps, as ``distloop sweep`` leaves them) is made
without training, then the window's study panel opens it while a 10 ms timer measures
how late the event loop runs (:class:`benchmarks.gui_bench.LatenessProbe`), against
the same timer on the idle window in the same run. It prints the read in the worker
thread, the drawing on the window's thread, and a refresh after one more trial ended
(the ended trials' run folders and the importances kept from the first read).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import numpy as np
import optuna

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.study_folders import objective, optuna_study_folder, storage_url  # noqa: E402

from benchmarks.gui_bench import LatenessProbe  # noqa: E402
from benchmarks.quick import sized  # noqa: E402

STEPS = sized(200, 20)
STEADY_S = sized(5.0, 0.5)  # with a trial running, the folder is looked at (and read) each second


def make_study(folder: Path, trials: int) -> Path:
    """``trials`` trials (all complete but a pruned and a running one), each with a run
    folder like a finished trial's."""
    optuna_study_folder(folder, trials, planned=trials + 10)
    project = json.loads((folder / "study.json").read_text())["project"]
    rows = "\n".join(f"{s},{1 / s:.6f},{s * 0.01:.3f}" for s in range(1, STEPS + 1))
    for number in range(trials):
        run = folder / "trials" / f"trial-{number:04d}"
        run.mkdir(parents=True)
        (run / "project.json").write_text(json.dumps({**project, "name": f"trial {number}"}))
        (run / "status.json").write_text(
            json.dumps({"status": "finished", "started_at": time.time(), "study_trial": number})
        )
        (run / "metrics.csv").write_text(f"step,loss,elapsed_s\n{rows}\n")
    return folder


def measure(trials: int) -> None:
    from distloop.gui.study.study_views import StudyPanel
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="study-views-bench-") as tmp:
        began = time.perf_counter()
        folder = make_study(Path(tmp) / "study", trials)
        print(f"made a study of {trials} trials in {time.perf_counter() - began:.1f} s")
        panel = StudyPanel()
        panel.resize(1000, 500)
        panel.show()
        shown: list[tuple[float, float]] = []  # wall and CPU seconds
        original = panel._show

        def timed_show(results, first):  # the window thread's share of a reading
            start, cpu = time.perf_counter(), time.thread_time()
            original(results, first)
            shown.append((time.perf_counter() - start, time.thread_time() - cpu))

        panel._show = timed_show  # type: ignore[method-assign]

        def wait(probe_s: float, until) -> list[float]:
            probe = LatenessProbe()
            probe.start()
            deadline = time.perf_counter() + probe_s
            while time.perf_counter() < deadline or not until():
                app.processEvents()
                time.sleep(0.001)
            return probe.stop()

        idle = wait(sized(2.0, 0.3), lambda: True)
        began = time.perf_counter()
        panel.open(folder)
        opening = wait(0.0, lambda: panel.results is not None)
        first_read = time.perf_counter() - began
        opening += wait(1.0, lambda: True)
        for index in range(panel.tabs.count()):
            panel.tabs.setCurrentIndex(index)
            app.processEvents()

        study = optuna.load_study(study_name="distloop", storage=storage_url(folder))
        study.optimize(objective, n_trials=1)
        began = time.perf_counter()
        refreshing = wait(0.0, lambda: len(panel.results.trials) == trials + 1)
        refresh = time.perf_counter() - began
        refreshing += wait(1.0, lambda: True)
        steady = wait(STEADY_S, lambda: True)

    def p99(values: list[float]) -> float:
        return float(np.percentile(values, 99))

    print(
        f"open: {first_read:.2f} s to the first reading drawn; the window's thread "
        f"{shown[0][0] * 1000:.0f} ms ({shown[0][1] * 1000:.0f} ms CPU); event loop lateness "
        f"p99 {p99(opening):.1f} ms, worst {max(opening):.0f} ms"
    )
    print(
        f"one more trial: shown after {refresh:.2f} s; the window's thread "
        f"{shown[-1][0] * 1000:.0f} ms ({shown[-1][1] * 1000:.0f} ms CPU); lateness p99 "
        f"{p99(refreshing):.1f} ms, worst {max(refreshing):.0f} ms"
    )
    print(
        f"{STEADY_S:.0f} s with a trial running ({len(shown)} readings drawn in all): lateness "
        f"p99 {p99(steady):.1f} ms, worst {max(steady):.0f} ms"
    )
    print(
        f"idle: lateness p99 {p99(idle):.1f} ms, worst {max(idle):.0f} ms; ratios of p99: "
        f"opening {p99(opening) / max(p99(idle), 0.1):.1f}, running "
        f"{p99(steady) / max(p99(idle), 0.1):.1f}"
    )


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else sized(300, 5))
