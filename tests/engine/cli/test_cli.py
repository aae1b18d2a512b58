"""The ``distloop`` command as a user types it: real processes, real output."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from distloop.engine import __version__
from distloop.engine.child_main import _failure_message
from distloop.engine.cli import build_parser
from distloop.engine.cli.common import EXIT_FAILED
from distloop.engine.cli.following import _print_event
from distloop.engine.examples import example_text, load_example
from distloop.engine.project_file import load_project
from distloop.engine.reporting import NonFiniteLossError
from distloop.engine.run_events import StatusChanged
from distloop.engine.run_folder import RunFolderError, read_metrics, read_status
from distloop.engine.run_model import outcome_of
from distloop.engine.user_code import UserCodeError
from support.distloop_testing import REPO, distloop, example_data


def test_version() -> None:
    result = distloop("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"distloop {__version__}"


def test_example_seed_prints_the_shipped_project() -> None:
    result = distloop("example", "seed")
    assert result.returncode == 0
    assert json.loads(result.stdout) == json.loads(example_text("seed"))


def test_a_printed_example_with_a_data_folder_validates_wherever_it_is_saved(tmp_path) -> None:
    """``distloop example digits > d.json`` once named its image folder relative to the
    installed examples, so the saved project failed with ``data.path ... does not exist``."""
    printed = distloop("example", "digits")
    assert printed.returncode == 0
    project = tmp_path / "d.json"
    project.write_text(printed.stdout)
    shipped = json.loads(example_text("digits"))
    assert Path(json.loads(printed.stdout)["data"]["path"]).is_absolute()
    assert json.loads(printed.stdout)["model"] == shipped["model"]
    result = distloop("validate", str(project))
    assert result.returncode == 0, result.stderr


def test_example_list_and_unknown_name() -> None:
    listing = distloop("example")
    assert listing.stdout.splitlines()[0].startswith("seed")
    unknown = distloop("example", "nope")
    assert unknown.returncode == 2 and "no example named 'nope'" in unknown.stderr


def test_validate_good_and_bad(tmp_path) -> None:
    good = tmp_path / "good.json"
    good.write_text(example_text("seed"))
    assert distloop("validate", str(good)).returncode == 0

    data = example_data()
    data["data"]["global_batch_size"] = -1
    data["strategy"]["kind"] = "warp_drive"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    result = distloop("validate", str(bad))
    assert result.returncode == 1
    assert "data.global_batch_size:" in result.stderr
    assert "strategy.kind:" in result.stderr
    assert "Traceback" not in result.stderr


def test_run_of_an_invalid_project_names_each_field_without_traceback(tmp_path) -> None:
    data = example_data()
    data["model"]["layers"][0]["units"] = 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    result = distloop("run", str(bad), "--out", str(tmp_path / "run"))
    assert result.returncode == 1
    assert "model.layers.0.units:" in result.stderr
    assert "Traceback" not in result.stderr + result.stdout


@pytest.mark.slow
def test_run_seed_prints_every_step_and_writes_the_run_folder(tmp_path) -> None:
    project = tmp_path / "seed.json"
    project.write_text(example_text("seed"))
    out = tmp_path / "run"
    result = distloop("run", str(project), "--out", str(out))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 100
    assert lines[0].startswith("step=1 loss=")
    printed = [(int(a[5:]), np.float32(b[5:])) for a, b in (line.split() for line in lines)]
    metrics = read_metrics(out)
    assert [s for s, _ in printed] == metrics["step"] == list(range(1, 101))
    np.testing.assert_array_equal([v for _, v in printed], np.float32(metrics["loss"]))
    assert (out / "metrics.csv").read_text().splitlines()[0] == "step,loss,elapsed_s"
    assert load_project(out / "project.json") == load_example("seed")
    assert "distloop: mirrored with 1 replica" in result.stderr
    status = read_status(out)  # the runs table's strategy is the kind chosen, as printed
    assert (status["strategy"], status["strategy_class"]) == ("mirrored", "MirroredStrategy")
    assert re.search(r"final loss \S+, \d+\.\d s$", result.stderr.splitlines()[-1])


@pytest.mark.slow
def test_python_dash_m_engine_behaves_like_run(tmp_path) -> None:
    import subprocess

    project = tmp_path / "p.json"
    data = example_data()
    data["training"] = {"steps": 5, "seed": 0}
    project.write_text(json.dumps(data))
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "distloop.engine",
            str(project),
            "--out",
            str(tmp_path / "r"),
            "--quiet",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "finished after step 5" in result.stderr
    assert read_metrics(tmp_path / "r")["step"] == [1, 2, 3, 4, 5]


@pytest.mark.slow
def test_run_without_out_uses_the_user_data_dir(tmp_path) -> None:
    import os

    data = example_data()
    data["training"] = {"steps": 2, "seed": 0}
    project = tmp_path / "p.json"
    project.write_text(json.dumps(data))
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    result = distloop("run", str(project), "--quiet", env=env)
    assert result.returncode == 0, result.stderr
    (run_dir,) = (tmp_path / "data" / "distloop" / "runs").iterdir()
    assert read_metrics(run_dir)["step"] == [1, 2]
    assert read_status(run_dir)["name"] == f"{data['name']} #1"  # named where it was made


@pytest.mark.slow
def test_failed_run_exits_non_zero_with_the_reason(tmp_path) -> None:
    """A cell only the engine reads: the run fails in one line, its traceback in engine.log."""
    data = example_data("regression")
    (tmp_path / "bad.csv").write_text("a,b,c,d,y\n1,2,3,4,5\nabc,2,3,4,5\n")
    data["data"] = {"source": "csv", "path": "bad.csv", "label_column": "y"}
    project = tmp_path / "p.json"
    project.write_text(json.dumps(data))
    result = distloop("run", str(project), "--out", str(tmp_path / "r"))
    assert result.returncode == 1
    assert "the run failed: DataError" in result.stderr
    assert f"{tmp_path / 'bad.csv'} line 3, column 'a': 'abc' is not a finite number" in (
        result.stderr
    )
    assert "Traceback" not in result.stderr  # a known failure: one line, the rest in engine.log
    assert "Traceback" in (tmp_path / "r" / "engine.log").read_text()

    # A file that is not there at all is refused before any run folder is made.
    data["data"]["path"] = "nowhere.csv"
    project.write_text(json.dumps(data))
    missing = distloop("run", str(project), "--out", str(tmp_path / "m"))
    assert missing.returncode == 1 and str(tmp_path / "nowhere.csv") in missing.stderr
    assert not (tmp_path / "m").exists()


def test_run_of_an_unknown_example_lists_the_examples() -> None:
    result = distloop("run", "--example", "nosuch")
    assert result.returncode == 2
    assert "no example named 'nosuch'; examples: seed, " in result.stderr


def test_a_project_too_big_for_this_machine_is_valid_but_not_run_here(tmp_path) -> None:
    data = example_data("regression")  # RMSprop: 10^12 parameters x 4 bytes x 3 = 10.9 TiB
    data["model"] = {"input_shape": [1_000_000], "layers": [{"kind": "dense", "units": 1_000_000}]}
    project = tmp_path / "big.json"
    project.write_text(json.dumps(data))
    checked = distloop("validate", str(project))
    assert checked.returncode == 0, checked.stderr
    assert "note: model.layers: needs about 11.0 TiB of memory" in checked.stdout
    assert "a run on this machine would be refused" in checked.stdout
    run = distloop("run", str(project), "--out", str(tmp_path / "run"))
    assert run.returncode == 1
    assert "model.layers: needs about 11.0 TiB of memory" in run.stderr
    assert "available" in run.stderr and "step=" not in run.stdout
    assert not (tmp_path / "run").exists()  # refused before TensorFlow and the run folder


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as raised:
        return raised


def test_known_failures_print_one_line_and_unexpected_ones_their_traceback(capsys) -> None:
    known = [
        _raised(RunFolderError("cannot write metrics.csv: No space left on device")),
        _raised(NonFiniteLossError(7, float("nan"))),
        _raised(UserCodeError("train_step returned a string")),
    ]
    for exc in known:
        message = _failure_message(exc)
        assert message.known and "Traceback" in message.traceback
        ended = StatusChanged("failed", outcome_of(message))
        assert _print_event(ended, quiet=False, verbose=False) == EXIT_FAILED
    assert "Traceback" not in capsys.readouterr().err
    unexpected = _failure_message(_raised(KeyError("strides")))
    assert not unexpected.known
    ended = StatusChanged("failed", outcome_of(unexpected))
    assert _print_event(ended, quiet=False, verbose=False) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.startswith("distloop: the run failed: KeyError: 'strides'\nTraceback")


def test_every_command_s_own_module_names_its_handler() -> None:
    """Each command module builds its parser and sets the function that runs it, so a new
    command is its module plus one line in ``build_parser``, never a branch in ``main``."""
    (commands,) = (a for a in build_parser()._actions if a.dest == "command")
    for name, parser in commands.choices.items():
        handler = parser.get_default("handler")
        assert callable(handler), name
        assert handler.__module__.startswith("distloop.engine."), name
