"""``distloop mlflow``: a finished job's folder (a study's too) logged as one MLflow run, and
the ``--mlflow-*`` options that log a run live from the command that follows it.

MLflow itself is imported only when something is logged (:mod:`engine.mlflow_log`), so
these options cost ``distloop``'s start nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..mlflow_log import (
    DEFAULT_EXPERIMENT,
    LiveSettings,
    MlflowLogError,
    NotAJobFolder,
    log_folder,
)
from ..run_folder import RunFolderLock
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _err

_URI_HELP = "MLflow's tracking URI (default: MLFLOW_TRACKING_URI, else MLflow's own default)"


def add_mlflow_command(commands: argparse._SubParsersAction) -> None:
    mlflow = commands.add_parser(
        "mlflow",
        help="log a finished run folder (a cluster's, a Slurm job's, a study's) as one MLflow run",
    )
    mlflow.add_argument("run", type=Path, metavar="RUN_DIR", help="the run, job or study folder")
    mlflow.add_argument("--tracking-uri", metavar="URI", help=_URI_HELP)
    mlflow.add_argument(
        "--experiment",
        metavar="NAME",
        default=DEFAULT_EXPERIMENT,
        help=f"the MLflow experiment (made when missing; default {DEFAULT_EXPERIMENT})",
    )
    mlflow.set_defaults(handler=command_mlflow)


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """``--mlflow-live`` and its store, for the commands that follow a whole job."""
    parser.add_argument(
        "--mlflow-live",
        action="store_true",
        help="log the run to MLflow as it trains, as one run (from this process, never from "
        "each worker)",
    )
    parser.add_argument(
        "--mlflow-tracking-uri", metavar="URI", help=f"with --mlflow-live: {_URI_HELP}"
    )
    parser.add_argument(
        "--mlflow-experiment",
        metavar="NAME",
        help=f"with --mlflow-live: the MLflow experiment (default {DEFAULT_EXPERIMENT})",
    )


def live_settings(args: argparse.Namespace) -> LiveSettings | None:
    """The command's live logging, or None; the store and experiment imply it."""
    uri = getattr(args, "mlflow_tracking_uri", None)
    experiment = getattr(args, "mlflow_experiment", None)
    if not (getattr(args, "mlflow_live", False) or uri or experiment):
        return None
    return LiveSettings(uri, experiment or DEFAULT_EXPERIMENT)


def worker_live_refusal(args: argparse.Namespace) -> str | None:
    """Why a single task of a cluster may not log live: its job would be a run per task."""
    if live_settings(args) is None or not (args.task or args.task_from):
        return None
    return (
        "distloop: --mlflow-live logs from the process that follows the whole job, not from "
        "one task: give it to distloop cluster, launch or submit --wait"
    )


def command_mlflow(args: argparse.Namespace) -> int:
    if RunFolderLock.held(args.run):
        _err(
            f"distloop: {args.run} is still running: log it when it ended, or live with "
            "--mlflow-live on the command that runs it"
        )
        return EXIT_USAGE
    try:
        logged = log_folder(args.run, args.tracking_uri, args.experiment)
    except (NotAJobFolder, MlflowLogError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    for name, run_id, count in logged:
        print(f"logged {name!r} as MLflow run {run_id} ({count:,} metric values)", flush=True)
    return EXIT_OK
