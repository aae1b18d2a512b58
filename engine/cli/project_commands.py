"""The commands that train nothing: ``validate`` and ``example`` (a project), ``devices``
(this machine) and ``predict`` (a run's saved model)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..config import uneven_batch_warnings
from ..examples import example_names, load_example, portable_example_text
from ..memory_check import memory_problems
from ..prediction import PredictionError, format_prediction, predict, prediction_json
from ..problems import ProblemsError
from ..run_checks import file_findings
from .common import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, _err, _load, _no_example


def add_project_commands(commands: argparse._SubParsersAction) -> None:
    """The parsers of ``validate``, ``example``, ``devices`` and ``predict``."""
    validate = commands.add_parser("validate", help="check a project file and list its problems")
    validate.add_argument("project", type=Path)

    example = commands.add_parser("example", help="print a built-in example project")
    example.add_argument("name", nargs="?", help=f"one of: {', '.join(example_names())}")

    devices = commands.add_parser(
        "devices", help="list the devices TensorFlow sees on this machine"
    )

    predict = commands.add_parser(
        "predict", help="run a run's saved model (model.keras) on CSV, .npy, image or text files"
    )
    predict.add_argument("run", type=Path, help="the run folder")
    predict.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="INPUT",
        help="a .csv (one example a row), an .npy array, an image, or a .txt for a text model",
    )
    predict.add_argument("--json", action="store_true", help="one JSON object per example")
    validate.set_defaults(handler=lambda args: command_validate(args.project))
    example.set_defaults(handler=lambda args: command_example(args.name))
    devices.set_defaults(handler=lambda args: command_devices())
    predict.set_defaults(
        handler=lambda args: command_predict(args.run, args.inputs, as_json=args.json)
    )


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
