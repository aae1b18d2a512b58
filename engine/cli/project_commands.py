"""The commands that train nothing: ``validate`` and ``example`` (a project), ``devices``
(this machine) and ``predict`` (a run's saved model)."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config import uneven_batch_warnings
from ..examples import example_names, load_example, portable_example_text
from ..formatting import format_prediction, prediction_json
from ..memory_check import memory_problems
from ..prediction import PredictionError, predict
from ..problems import ProblemsError
from ..run_checks import file_findings
from .common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, _err, _load, _no_example


def command_validate(path: Path) -> int:
    project = _load(path)
    if project is None:
        return EXIT_FAILED
    found = file_findings(project)
    if found.problems:
        _err(f"distloop: {ProblemsError(found.problems, str(path))}")
        return EXIT_FAILED
    print(f"{path}: valid ({project.strategy.kind}, {project.total_steps() or '?'} steps)")
    for note in found.notes + uneven_batch_warnings(project):
        print(f"note: {note}")
    # Valid all the same: the project may be meant for a bigger machine; a run here refuses.
    for problem in memory_problems(project):
        print(f"note: {problem}; a run on this machine would be refused")
    return EXIT_OK


def command_example(name: str | None) -> int:
    if name is None:
        for known in example_names():
            print(f"{known:16} {load_example(known).name}")
        return EXIT_OK
    try:
        sys.stdout.write(portable_example_text(name))
    except KeyError:
        _err(_no_example(name))
        return EXIT_USAGE
    return EXIT_OK


def command_devices() -> int:
    from ..devices import detect_devices

    try:
        found = detect_devices()
    except (TimeoutError, RuntimeError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    print(f"TensorFlow {found.tensorflow_version}")
    for device in found.devices:
        print(f"{device.device_type:6} {device.name}")
    return EXIT_OK


def command_predict(run_dir: Path, inputs: list[Path], *, as_json: bool) -> int:
    """One line per example on stdout; one line per input that cannot be read on stderr."""
    try:
        result = predict(run_dir, inputs)
    except PredictionError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except KeyboardInterrupt:  # the prediction process is ended with it
        _err("distloop: prediction interrupted")
        return EXIT_INTERRUPTED
    for prediction in result.predictions:
        print(prediction_json(prediction) if as_json else format_prediction(prediction))
    for error in result.errors:
        _err(f"distloop: {error}")
    return EXIT_FAILED if result.errors else EXIT_OK
