"""The prediction process kept warm for Try It: the model loaded once for many requests, a
crash said in one line and the process started again by the next prediction."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from distloop.engine.prediction import PredictionError, PredictionProcess
from distloop_testing import example_data, model_run_folder

ROW = ",".join(["0.5"] * 8)


@pytest.mark.slow
def test_one_process_answers_every_request_and_a_crash_is_one_line_then_a_restart(
    tmp_path: Path,
) -> None:
    run_dir = model_run_folder(tmp_path / "run", example_data("classification"))
    process = PredictionProcess(run_dir)
    try:
        first = process.predict(rows=[ROW])
        pid = process.pid
        assert pid is not None
        assert [p.input for p in first.predictions] == ["row 1"] and first.errors == []
        second = process.predict(rows=["1,2", ROW])
        assert process.pid == pid  # the same process: TensorFlow and the model loaded once
        assert second.predictions[0].classes == first.predictions[0].classes
        assert second.errors == ["row 1: has 2 value(s); the model takes 8 feature(s)"]

        os.kill(pid, signal.SIGKILL)
        with pytest.raises(PredictionError) as crashed:
            process.predict(rows=[ROW])
        assert str(crashed.value) == (
            f"{run_dir}: the prediction process was killed by SIGKILL (the system also does "
            "this when memory runs out); the next prediction starts it again"
        )
        third = process.predict(rows=[ROW])
        assert process.pid not in (None, pid)
        assert third.predictions[0].classes == first.predictions[0].classes
    finally:
        process.close()
    assert process.pid is None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
