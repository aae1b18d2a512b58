"""A warm engine converts the run's code with AutoGraph before its job (TensorFlow): the run
then converts nothing, and trains to the same numbers."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.examples import load_example
from distloop.engine.process import WarmEngine
from support.distloop_testing import REPO, guide_trace, run_engine

pytestmark = pytest.mark.slow

CONVERSIONS_IN_RUNS = """
import json, queue, sys, tempfile
from pathlib import Path
from tensorflow.python.autograph.pyct import transpiler
from distloop.engine.channel import Channel
from distloop.engine.examples import load_example
from distloop.engine.tf.autograph_warm_up import warm_up_autograph
from distloop.engine.tf.training import train

if sys.argv[1] == "warm":
    warm_up_autograph(lambda: False)
converted = []
convert = transpiler.GenericTranspiler.transform_function


def counted(self, fn, user_context):  # AutoGraph calls it only for what it has not cached
    converted.append(fn.__qualname__)
    return convert(self, fn, user_context)


transpiler.GenericTranspiler.transform_function = counted
project = load_example("digits")  # the seed example's step, and evaluation, image folders
project = project.model_copy(
    update={
        "training": project.training.model_copy(update={"steps": 4}),
        "evaluation": project.evaluation.model_copy(update={"every": 2}),
    }
)
with tempfile.TemporaryDirectory() as folder:
    result = train(project, Path(folder), Channel(queue.Queue(), None, None), lambda: False)
    assert result.status == "finished", result
print(json.dumps(converted))
"""


def conversions_in_runs(warm: bool) -> list[str]:
    """The functions AutoGraph converted while the digits example (the built-in step on 2
    replicas, an image folder, evaluation) ran 4 steps in a fresh process, after the
    warm-up (``warm``) or without it."""
    done = subprocess.run(
        [sys.executable, "-c", CONVERSIONS_IN_RUNS, "warm" if warm else "cold"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_after_the_warm_up_a_run_converts_nothing() -> None:
    assert conversions_in_runs(warm=False), "a run without the warm-up converts its step"
    assert conversions_in_runs(warm=True) == []


def test_a_warmed_up_engine_trains_the_guide_trace(tmp_path: Path) -> None:
    """A warm engine that finished its warm-up before its job (its CPU idle) runs the seed
    example to the hand-written guide program's losses, as a cold one does."""
    expected = guide_trace()
    warm = WarmEngine()
    try:
        wait_until_idle(warm.child.pid)
        run = run_engine(load_example("seed"), tmp_path, warm=warm)
    finally:
        warm.close()
    assert run["terminal"].status == "finished", run["terminal"]
    np.testing.assert_allclose(run["losses"], expected, rtol=1e-6)


def wait_until_idle(pid: int | None, timeout_s: float = 300) -> None:
    """Until the process used under 20 ms of CPU in half a second (TensorFlow loaded and
    the conversions made)."""
    assert pid is not None
    stat = Path(f"/proc/{pid}/stat")

    def cpu_ticks() -> int:
        fields = stat.read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])

    deadline = time.monotonic() + timeout_s
    before = cpu_ticks()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu_ticks()
        if now - before < 2:
            return
        before = now
    raise AssertionError(f"the warm engine was still busy after {timeout_s:.0f} s")
