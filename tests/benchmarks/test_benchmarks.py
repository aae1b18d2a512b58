"""Every benchmark in quick mode (``--quick``: its own code on tiny sizes), each in a real
process, as ``python -m benchmarks.NAME`` runs it: a renamed attribute or a changed
interface breaks a test here, not a benchmark found broken weeks later. What quick mode
prints is no result (every line says so); RESULTS.md's numbers come from full runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support.distloop_testing import REPO

sys.path.insert(0, str(REPO))
from benchmarks.quick import NOT_A_RESULT

QUICK_LIMIT_S = 840
"""A benchmark's quick run on a loaded 2-core machine (an engine process a measurement)."""


def quick_run(benchmark: str, *arguments: str) -> list[str]:
    """The lines ``python -m benchmarks.BENCHMARK ARGUMENTS --quick`` printed, each checked
    to say it is no result (and given without that mark)."""
    done = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{benchmark}", *arguments, "--quick"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=QUICK_LIMIT_S - 30,
        env={**os.environ, "QT_QPA_PLATFORM": "offscreen"},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    lines = done.stdout.splitlines()
    assert lines, f"benchmarks.{benchmark} printed nothing"
    unmarked = [line for line in lines if not line.startswith(NOT_A_RESULT)]
    assert not unmarked, f"quick lines printed as results: {unmarked}"
    return [line.removeprefix(NOT_A_RESULT) for line in lines]


def assert_reported(lines: list[str], *labels: str) -> None:
    """Each of the benchmark's rows was reached: a line starts with its label."""
    for label in labels:
        assert any(line.startswith(label) for line in lines), f"no {label!r} in {lines}"


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_engine_bench() -> None:
    """With its baselines (``benchmarks.baselines``, each a process of its own): the guide's
    loop as a plain script, ``model.fit`` on the MLP and the CNN, and the CNN's loop by hand,
    called as the full run calls them."""
    lines = quick_run("engine_bench")
    assert_reported(
        lines,
        "1. engine overhead",
        "1b. with the default input_distribution",
        "2. fused steps",
        "3. MLP",
        "9. CNN",
        "5. engine memory",
    )
    baselines = ("plain guide script", "model.fit", "the guide's loop by hand")
    for baseline in baselines:
        assert any(baseline in line for line in lines), f"no {baseline!r} in {lines}"


@pytest.mark.parametrize(
    "scenario",
    [[], ["typing"], ["runs"], ["draw"], ["preview"], ["keys"]],
    ids=["rows 4a-5a", "4e", "4f", "4g", "4h", "4i"],
)
def test_gui_bench(scenario: list[str]) -> None:
    labels = {
        "typing": ["4e. event loop p99 lateness typing"],
        "runs": ["4f. runs list"],
        "draw": ["4g. event loop p99 lateness drawing a past run"],
        "preview": ["4g. event loop p99 lateness previewing"],
        "keys": ["4i. a key in a number field in range", "4i. a key in a number field out of"],
    }
    expected = labels[scenario[0]] if scenario else ["4a.", "4b.", "4c.", "4d.", "5a."]
    assert_reported(quick_run("gui_bench", *scenario), *expected)


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_startup_bench() -> None:
    """Run in a window with a cold engine and with the warm one, to the first step."""
    assert_reported(
        quick_run("startup_bench"),
        "click to first step, cold",
        "click to first step, warm",
        "6. click to first step",
    )


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
@pytest.mark.parametrize(
    "scenario", [[], ["csv"], ["memory"], ["mixing"]], ids=["row 7", "row 10", "row 8", "row 7b"]
)
def test_data_bench(scenario: list[str]) -> None:
    """Row 8 (memory) runs its engines in a memory cgroup where it may (root), and without
    a limit elsewhere, as the benchmark itself does."""
    labels = {
        "csv": ["wide:", "narrow:", "  check:", "  epoch:"],
        "memory": ["one epoch over big.npz:", "one epoch over small.npz", "ratios"],
        "mixing": ["folder larger than the shuffle buffer"],
    }
    expected = labels[scenario[0]] if scenario else ["image folder ("]
    assert_reported(quick_run("data_bench", *scenario), *expected)


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_predict_bench() -> None:
    assert_reported(
        quick_run("predict_bench"),
        "cold prediction",
        "warm process, first prediction",
        "warm prediction",
        "warm image prediction",
        "goal:",
    )


@pytest.mark.sshd
@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_launch_bench() -> None:
    assert_reported(quick_run("launch_bench"), "2 workers, local", "2 workers, ssh ")


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_study_bench() -> None:
    """Grid, random and TPE + ASHA studies of real trials, and their summary."""
    assert_reported(quick_run("study_bench"), "budget ")


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_system_metrics_bench() -> None:
    """Sampled and unsampled runs of the seed and the CNN, and the sampler's own cost."""
    assert_reported(
        quick_run("system_metrics_bench", "1"),
        "machine:",
        "1. seed, K = 1",
        "2. CNN, K = 20",
        "3. the sampler's thread",
    )


def test_study_views_bench() -> None:
    assert_reported(quick_run("study_views_bench"), "open:", "one more trial:", "idle: lateness")


@pytest.mark.slow
@pytest.mark.timeout(QUICK_LIMIT_S)
def test_finder_bench() -> None:
    """lr-find against the run it tunes, a few steps of each (RESULTS row 16)."""
    assert_reported(quick_run("finder_bench", "1"), "machine:", "round 1: lr-find")
