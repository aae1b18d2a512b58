"""``distloop sweep``: a study from the command line, one line per trial.

Ctrl-C (or SIGTERM) stops the current trial through the normal stop path and leaves
the study resumable (``distloop sweep --resume DIR``), as does a killed CLI.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from typing import get_args

from ..code_text import shortened
from ..problems import Problem, ProblemsError
from ..project_file import load_project
from ..run_folder import STUDY_FILE
from .objective import OBJECTIVES
from .results import StudyUnreadable, read_results
from .runner import (
    STORAGE_FILE,
    Pruner,
    Sampler,
    Study,
    StudyPlan,
    StudySettings,
    TrialResult,
    new_study_dir,
    read_plan,
    write_plan,
)
from .space import Axis, Choices, parse_space

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
NOTE_CHARS = 500
"""Of why a trial failed, on its line: enough for an error's own words."""


def add_sweep_command(commands: argparse._SubParsersAction) -> None:
    sweep = commands.add_parser(
        "sweep",
        help="search settings with Optuna: trials that learn from each other, pruned live",
    )
    source = sweep.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument(
        "--resume", type=Path, metavar="DIR", help="continue the study in this folder"
    )
    sweep.add_argument(
        "--space",
        type=Path,
        help='JSON: {"optimizer.learning_rate": {"low": 1e-4, "high": 1, "log": true}, ...}',
    )
    defaults = StudySettings()
    sweep.add_argument("--trials", type=int, default=defaults.trials, help="trials to run")
    sweep.add_argument("--sampler", choices=get_args(Sampler), default=defaults.sampler)
    sweep.add_argument("--pruner", choices=get_args(Pruner), default=defaults.pruner)
    sweep.add_argument(
        "--objective",
        choices=OBJECTIVES,
        help="what to optimize (default: val_loss when the project evaluates, else loss)",
    )
    sweep.add_argument("--seed", type=int, default=0, help="the sampler's seed")
    sweep.add_argument(
        "--warmup-steps", type=int, default=0, help="steps before a trial may be pruned"
    )
    sweep.add_argument("--out", type=Path, help="the study's folder (default: a new one)")
    sweep.set_defaults(handler=command_sweep)


def _err(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def command_sweep(args: argparse.Namespace) -> int:
    try:
        folder: Path | None
        if args.resume is not None:
            folder = args.resume
            plan = read_plan(folder)
            _check_storage(folder, plan)
        else:
            plan, folder = _new_plan(args)
        problems = plan.problems()
        if problems:
            raise ProblemsError(problems, "sweep")
        if folder is None:  # made only now: a plan with problems leaves nothing behind
            folder = new_study_dir(plan.project.name)
        if args.resume is None:
            write_plan(folder, plan)
        study = Study(folder, plan)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except OSError as exc:
        _err(f"distloop: {exc.strerror or exc}: {exc.filename or ''}")
        return EXIT_FAILED
    for number in study.requeue_interrupted():
        _err(f"distloop: trial {number} was interrupted; its values run again")
    settings = plan.settings
    _err(
        f"distloop: study {folder} ({settings.sampler} sampler, {settings.pruner} pruner, "
        f"{settings.objective} {study.study.direction.name.lower()}d): "
        f"{study.finished_trials()} of {plan.planned_trials()} trials done"
    )
    received: list[int] = []
    previous = {
        number: signal.signal(number, lambda signum, frame: received.append(signum))
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        complete = study.run(on_trial=_print_trial, stopping=lambda: bool(received))
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    if not complete:
        _err(f"distloop: study stopped; continue it with: distloop sweep --resume {folder}")
        return EXIT_INTERRUPTED
    best = study.best()
    if best is None:
        _err("distloop: no trial completed")
        return EXIT_FAILED
    print(
        f"best: trial {best.number} {settings.objective}={best.value:.6g} "
        f"{_params(best)} ({best.run_dir})"
    )
    return EXIT_OK


def _new_plan(args: argparse.Namespace) -> tuple[StudyPlan, Path | None]:
    if args.space is None:
        raise _one("--space SPACE.json is required for a new study")
    project = load_project(args.project).resolve_paths(args.project.parent)
    space = parse_space(args.space.read_text(encoding="utf-8"), project, str(args.space))
    objective = args.objective or ("val_loss" if project.evaluation is not None else "loss")
    try:
        settings = StudySettings(
            trials=args.trials,
            sampler=args.sampler,
            pruner=args.pruner,
            objective=objective,
            seed=args.seed,
            warmup_steps=args.warmup_steps,
        )
    except ValueError as exc:
        raise _one(str(exc)) from None
    folder = args.out
    if folder is not None and folder.exists() and any(folder.iterdir()):
        raise _one(f"{folder} is not empty; continue its study with --resume {folder}")
    return StudyPlan(project, space, settings), folder


def _check_storage(folder: Path, plan: StudyPlan) -> None:
    """Refuses a folder whose ``study.db`` is not the study its ``study.json`` plans (one
    copied in from another project's study, or no Optuna storage at all): resuming would
    add trials to another search. Read only: nothing in the folder changes."""
    try:
        found = read_results(folder)
    except StudyUnreadable as exc:
        raise ProblemsError([Problem((), str(exc))], str(folder)) from None
    for name, axis in found.axes.items():
        planned = plan.space.axes.get(name)
        if planned is None or not _same_axis(planned, axis):
            plans = "does not search it" if planned is None else f"searches {_shown(planned)}"
            raise ProblemsError(
                [
                    Problem(
                        (),
                        f"{STORAGE_FILE} holds another study's trials: they search "
                        f"{shortened(name)} "
                        f"{_shown(axis)}, {STUDY_FILE} {plans}; nothing was changed",
                    )
                ],
                str(folder),
            )


def _same_axis(planned: Axis, searched: Axis) -> bool:
    if isinstance(planned, Choices) or isinstance(searched, Choices):
        return (
            isinstance(planned, Choices)
            and isinstance(searched, Choices)
            and list(planned.values) == list(searched.values)
        )
    return (type(planned), planned.low, planned.high, planned.log) == (
        type(searched),
        searched.low,
        searched.high,
        searched.log,
    )


def _shown(axis: Axis) -> str:
    """The axis in a message; a crafted storage's choices may be megabytes: shortened."""
    if isinstance(axis, Choices):
        return f"in {shortened(str(list(axis.values)))}"
    return f"over [{axis.low}, {axis.high}]{' (log)' if axis.log else ''}"


def _one(message: str) -> ProblemsError:
    return ProblemsError([Problem((), message)], "sweep")


def _params(result: TrialResult) -> str:
    """The trial's values on its line: a study folder's values are anyone's text (terminal
    escapes, bidirectional marks, lone surrogates, megabytes), printed escaped and short."""
    return " ".join(f"{path}={shortened(str(value))}" for path, value in result.params.items())


def _print_trial(result: TrialResult) -> None:
    value = "" if result.value is None else f" {result.value:.6g}"
    note = f": {shortened(result.note, NOTE_CHARS)}" if result.note else ""
    print(
        f"trial {result.number} {result.state}{value} after {result.steps} steps "
        f"{_params(result)}{note}",
        flush=True,
    )
