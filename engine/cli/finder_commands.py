"""``distloop lr-find`` and ``distloop batch-find``: short runs of the project, on its own
strategy, replicas and mixed precision, before the long one.

Each trial is an ordinary engine run (opened by ``engine.run_start``: the engine process,
its loop and hooks) in a folder of its own beside the runs folder (``finder_runs_root``),
marked as a finder's (``finder.json``), so none is listed, compared or resumed as a
training run. A multi_worker_mirrored project's trial is a local cluster of its tasks, as
``distloop run`` runs it; each task obeys its cluster's finder file.

``lr-find`` is one run whose rate rises step by step (``engine.lr_finder``);
``batch-find`` runs one child engine per global batch size, so one that runs out of
memory dies alone and the search goes on with the sizes that fit.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from ..batch_finder import BatchTrial, largest_fitting, next_batch, throughput, trial_project
from ..cluster_layout import local_cluster_tasks, runs_as_cluster, serves_only
from ..config import Project
from ..lr_finder import (
    BATCH_SIZE,
    RateRange,
    cannot_find_on,
    curve_file,
    finder_project,
    mark_finder_run,
    read_curve,
    suggest,
    write_curve,
    write_range,
)
from ..memory_check import memory_problems
from ..messages import RunFailed, RunFinished
from ..problems import ProblemsError
from ..run_folder import default_runs_root, new_folder, new_run_dir, read_metrics
from ..run_history import finder_runs_root
from ..run_lifecycle import RunLifecycle
from ..run_start import RunRefused, RunRequest, open_requested
from .arguments import add_overwrite_argument
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
    EXIT_USAGE,
    _err,
    _load,
    _may_start_here,
    announce_custom_code,
)
from .following import run_in_foreground

DEFAULT_RATES = RateRange()
BATCH_STEPS = 6
"""Steps each batch-size trial trains: the first traces the step, the rest are timed."""


def add_finder_commands(commands: argparse._SubParsersAction) -> None:
    lr_find = commands.add_parser(
        "lr-find",
        help="find a learning rate: a short run whose rate rises from --low to --high, "
        "on the project's own strategy; prints the suggestion and writes the curve",
    )
    lr_find.add_argument("project", type=Path, help="project JSON file")
    lr_find.add_argument("--low", type=float, default=DEFAULT_RATES.low, help="first rate")
    lr_find.add_argument("--high", type=float, default=DEFAULT_RATES.high, help="last rate")
    lr_find.add_argument(
        "--steps", type=int, default=DEFAULT_RATES.steps, help="steps from --low to --high"
    )
    lr_find.add_argument(
        "--diverge",
        type=float,
        default=DEFAULT_RATES.diverge,
        help="stop once the smoothed loss exceeds this many times its lowest value",
    )
    lr_find.add_argument(
        "--out", type=Path, help="the finder run's folder (default: a new one beside the runs)"
    )
    lr_find.add_argument("--csv", type=Path, help="also write the curve to this CSV file")
    add_overwrite_argument(lr_find)
    lr_find.add_argument("--verbose", action="store_true", help="also print TensorFlow's log")

    batch_find = commands.add_parser(
        "batch-find",
        help="find the largest global batch that fits every replica (doubling, then a "
        "binary search; each size in its own engine process), with examples/s at each",
    )
    batch_find.add_argument("project", type=Path, help="project JSON file")
    batch_find.add_argument(
        "--start", type=int, help="the first global batch tried (default: the project's)"
    )
    batch_find.add_argument("--max", type=int, help="the largest global batch tried")
    batch_find.add_argument(
        "--out", type=Path, help="the folder of its trials (default: a new one beside the runs)"
    )
    lr_find.set_defaults(handler=command_lr_find)
    batch_find.set_defaults(handler=command_batch_find)


def command_lr_find(args: argparse.Namespace) -> int:
    rates = RateRange(low=args.low, high=args.high, steps=args.steps, diverge=args.diverge)
    problem = rates.problem()
    if problem is not None:
        _err(f"distloop: {problem}")
        return EXIT_USAGE
    project = _finder_project(args.project, "lr-find")
    if project is None:
        return EXIT_FAILED
    finder = finder_project(project, rates)
    if not _may_start_here(finder, str(args.project), processes=_processes(finder)):
        return EXIT_FAILED
    try:
        run_dir = args.out or new_run_dir(f"{project.name} lr-find", _finder_root())
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        _err(f"distloop: cannot create the finder's run folder: {exc}")
        return EXIT_FAILED
    # A multi-worker project's trial is a local cluster, as distloop run makes it.
    request = RunRequest(
        finder, run_dir, overwrite=args.overwrite, command="lr-find", layout="auto"
    )
    opened = open_requested(request)
    write_range(run_dir, rates)
    code = run_in_foreground(opened, quiet=True, verbose=args.verbose)
    if code in (EXIT_INTERRUPTED, EXIT_TERMINATED):
        return code
    curve = read_curve(run_dir)
    try:
        write_curve(curve_file(run_dir), curve)
        if args.csv is not None:
            write_curve(args.csv, curve)
    except OSError as exc:
        _err(f"distloop: cannot write the curve: {exc.strerror or exc}")
        return EXIT_FAILED
    suggestion = suggest(curve, rates.diverge)
    ended = (
        f"stopped early at step {len(curve.rates)}: the loss diverged"
        if curve.stopped_early
        else "all steps ran"
    )
    print(
        f"learning-rate finder: {len(curve.rates)} of {rates.steps} steps, rates "
        f"{rates.low:.3g} to {curve.rates[-1] if curve.rates else rates.low:.3g}; {ended}"
    )
    print(f"curve: {args.csv or curve_file(run_dir)}")
    if suggestion is None:
        _err(
            f"distloop: only {len(curve.rates)} step(s) trained before the loss diverged: "
            "no rate to suggest; try a lower --low or more --steps"
        )
        return EXIT_FAILED
    print(f"suggested learning rate: {suggestion.rate:.3g} ({suggestion.rule})")
    print(
        f"  the smoothed loss was lowest at {suggestion.minimum:.3g} and fell fastest at "
        f"{suggestion.steepest:.3g} (steepest descent)"
    )
    return EXIT_OK


def _finder_project(path: Path, command: str) -> Project | None:
    """The project, when a finder can run it here: in one engine process (its strategy's
    replicas included) or, for multi_worker_mirrored, as a local cluster of its tasks, as
    ``distloop run`` would run it; its custom code announced. None, said why, when not."""
    project = _load(path)
    if project is None:
        return None
    refusal = cannot_find_on(project)
    if refusal is not None:
        _err(f"distloop: {command}: {refusal}")
        return None
    return project if announce_custom_code(project, path.parent) else None


def _processes(project: Project) -> int:
    """The engine processes a trial starts here: a local cluster's tasks, or one."""
    return len(local_cluster_tasks(project)) if runs_as_cluster(project) else 1


def _replicas(project: Project) -> int:
    """The replicas a trial trains on: a local cluster's trainers (one device each, as
    on a machine without GPUs), else the strategy's own count (1 when only TensorFlow
    can tell)."""
    per_task = project.strategy.replica_count_hint() or 1
    if not runs_as_cluster(project):
        return per_task
    return per_task * sum(
        not serves_only(project.strategy.kind, t) for t in local_cluster_tasks(project)
    )


def _finder_root() -> Path:
    return finder_runs_root(default_runs_root())


@dataclass
class _Search:
    """The batch-size search's trials so far, by global batch size."""

    project: Project
    top: Path
    replicas: int
    trials: dict[int, BatchTrial]

    def attempt(self, batch: int) -> BatchTrial:
        trial = self._run(batch)
        self.trials[batch] = trial
        print(trial.describe(self.replicas), flush=True)
        return trial

    def _run(self, batch: int) -> BatchTrial:
        try:
            candidate = trial_project(self.project, batch, BATCH_STEPS)
        except ProblemsError as exc:
            return BatchTrial(batch, fits=False, reason=str(exc.problems[0]), ran=False)
        estimate = memory_problems(candidate)
        if estimate:
            return BatchTrial(
                batch, fits=False, reason=f"memory estimate: {estimate[0].message}", ran=False
            )
        run_dir = self.top / f"batch-{batch}"
        run_dir.mkdir()
        try:  # a cluster as run would make it
            request = RunRequest(candidate, run_dir, command="batch-find", layout="auto")
            engine = open_requested(request).handle
        except RunRefused as exc:
            return BatchTrial(batch, fits=False, reason=f"its run could not open: {exc}")
        mark_finder_run(run_dir, BATCH_SIZE, global_batch_size=batch)
        lifecycle = RunLifecycle()
        try:
            engine.start()
            while not engine.done and not lifecycle.ended:
                for message in engine.poll(0.5):
                    lifecycle.note(message)
        finally:
            engine.close()
        ended = lifecycle.terminal
        if isinstance(ended, RunFinished) and ended.status == "finished":
            metrics = read_metrics(run_dir)
            return BatchTrial(batch, fits=True, examples_per_s=throughput(metrics, batch))
        return BatchTrial(batch, fits=False, reason=_failure(ended))


def _failure(ended: RunFailed | RunFinished | None) -> str:
    """A failed trial's reason in one line: TensorFlow's out-of-memory line when it has one
    (its message starts with the graph node's whereabouts), else the message's first."""
    if not isinstance(ended, RunFailed):
        return "the engine stopped before its last step"
    lines = [line.strip() for line in ended.message.splitlines() if line.strip()]
    memory = [line for line in lines if "OOM" in line or "memory" in line.lower()]
    line = (memory or lines or ["no message"])[0]
    return f"{ended.error_type}: {line}"[:300]


def command_batch_find(args: argparse.Namespace) -> int:
    project = _finder_project(args.project, "batch-find")
    if project is None:
        return EXIT_FAILED
    replicas = _replicas(project)
    start = args.start or project.data.global_batch_size
    if start < 1 or (args.max is not None and args.max < start):
        _err("distloop: --start must be at least 1 and at most --max")
        return EXIT_USAGE
    if start % replicas:
        _err(
            f"distloop: --start {start} does not split evenly over the {replicas} replicas: "
            f"take a multiple of {replicas}"
        )
        return EXIT_USAGE
    try:
        top = args.out or new_folder(f"{project.name} batch-find", _finder_root())
        top.mkdir(parents=True, exist_ok=True)
        if any(top.iterdir()):
            _err(f"distloop: {top} is not empty: batch-find writes its trials into a new folder")
            return EXIT_USAGE
    except OSError as exc:
        _err(f"distloop: cannot create the finder's folder: {exc}")
        return EXIT_FAILED
    _err(f"distloop: batch-size trials in {top}")
    search = _Search(project, top, replicas, {})
    batch: int | None = start
    try:
        while batch is not None:
            search.attempt(batch)
            if not search.trials[start].fits:
                _err(
                    f"distloop: not even the first global batch, {start}, ran: "
                    f"{search.trials[start].reason}"
                )
                return EXIT_FAILED
            batch = next_batch(search.trials, replicas, args.max)
    except KeyboardInterrupt:  # the trial's engine was ended as its handle closed
        _err(f"distloop: Ctrl-C: the search stopped at global batch {batch}")
        if not any(trial.fits for trial in search.trials.values()):
            return EXIT_INTERRUPTED
        print(largest_fitting(search.trials, replicas))
        return EXIT_INTERRUPTED
    print(largest_fitting(search.trials, replicas))
    return EXIT_OK
