"""``distloop`` subcommands that need no window: run, cluster, export, validate, predict, ...

Errors a user can fix (a bad project, a missing file) are printed as plain
messages with a non-zero exit; a traceback appears only for an unexpected engine
failure (not one of ``engine.child_main.KNOWN_FAILURES``), after the message, as the
engine's own report.

The parser and the dispatch to each command are here; the commands are grouped into
modules, and this package's names (``__all__``) are what the rest of Distloop imports
(the launcher, ``gui.launcher``, and ``python -m distloop.engine``):

- :mod:`.common`: the exit codes, the error line, loading a project, the checks before a
  run starts here, and announcing the custom code a run will execute.
- :mod:`.run_folders`: the run folder a command writes: made, claimed, or found resumable.
- :mod:`.following`: a run in the foreground: its messages printed, Ctrl-C and SIGTERM
  answered, a cluster restarted after a task died (``--max-restarts``).
- :mod:`.project_commands`: ``validate``, ``example``, ``devices`` and ``predict``.
- :mod:`.run_commands`: ``run`` and ``run --resume`` (a requeued Slurm task's included).
- :mod:`.cluster_commands`: ``cluster``, its ``--resume`` and ``--dump``, and the parsers of
  the commands that run a cluster or ready one.
- :mod:`.launch_commands`: ``launch`` and ``preflight``, a cluster's hosts over SSH.
- :mod:`.submit_command`: ``submit``, a Slurm batch job, and the job's shape.
- :mod:`.export_command`: ``export``, every format, the standalone script included.
- :mod:`.finder_commands`: ``lr-find`` and ``batch-find``, short trial runs before the long one.
- :mod:`.mlflow_command`: ``mlflow``, a finished job into MLflow, and the ``--mlflow-live``
  options of the commands that follow a job.

``sweep`` is ``engine.study.command``'s.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__
from ..cluster_layout.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from ..examples import example_names
from ..run_folder import MESSAGES_FILE
from ..study.command import add_sweep_command, command_sweep
from .cluster_commands import add_cluster_commands, command_cluster
from .common import EXIT_USAGE
from .export_command import command_export
from .finder_commands import add_finder_commands, command_batch_find, command_lr_find
from .launch_commands import command_launch, command_preflight
from .mlflow_command import add_live_arguments, add_mlflow_command, command_mlflow
from .project_commands import command_devices, command_example, command_predict, command_validate
from .run_commands import command_run
from .run_folders import add_overwrite_argument
from .submit_command import command_submit

__all__ = ["COMMANDS", "build_parser", "main"]

COMMANDS = (
    "run",
    "cluster",
    "launch",
    "preflight",
    "submit",
    "export",
    "validate",
    "example",
    "devices",
    "predict",
    "sweep",
    "lr-find",
    "batch-find",
    "mlflow",
)
"""The subcommands; any other first word that names a project file opens the window."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="distloop",
        description="Configure and run TensorFlow distributed training with custom loops. "
        "Without a command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"distloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="train a project headless, one line per step")
    add_run_arguments(run)
    task = run.add_mutually_exclusive_group()
    task.add_argument(
        "--task",
        metavar="TYPE:INDEX",
        help="run this task (e.g. worker:1) of the cluster in the project's tf_config or "
        "in TF_CONFIG (which wins when set)",
    )
    task.add_argument(
        "--task-from",
        choices=["slurm"],
        help="compute the cluster and this task from the variables srun sets (each task "
        "then runs in OUT/tasks/TYPE-INDEX)",
    )
    run.add_argument(
        "--messages",
        action="store_true",
        help="machine-readable: the protocol's messages as JSON lines on stdout; a 'stop' "
        "line on stdin stops the run, the end of stdin stops it too (a launcher's channel)",
    )
    run.add_argument(
        "--record-messages",
        action="store_true",
        help=f"also append the protocol's messages as JSON lines to {MESSAGES_FILE} in the run "
        "folder: a follower on a shared file system reads them (distloop submit --wait)",
    )
    run.add_argument(
        "--port-base",
        type=int,
        default=SLURM_PORT_BASE,
        help=f"with --task-from slurm: the port of each node's first task (default "
        f"{SLURM_PORT_BASE}; the node's next tasks take the ports after it)",
    )
    add_live_arguments(run)
    add_cluster_commands(commands)
    add_sweep_command(commands)
    add_finder_commands(commands)
    add_mlflow_command(commands)

    validate = commands.add_parser("validate", help="check a project file and list its problems")
    validate.add_argument("project", type=Path)

    example = commands.add_parser("example", help="print a built-in example project")
    example.add_argument("name", nargs="?", help=f"one of: {', '.join(example_names())}")

    commands.add_parser("devices", help="list the devices TensorFlow sees on this machine")

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
    return parser


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument("--example", metavar="NAME", help="run a built-in example instead")
    source.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue a stopped, failed or killed run from its last checkpoint",
    )
    parser.add_argument(
        "--out", type=Path, help="run folder (default: a new folder under the user's data dir)"
    )
    add_overwrite_argument(parser)
    parser.add_argument(
        "--quiet", action="store_true", help="print only the summary, not a line per step"
    )
    parser.add_argument(
        "--verbose", action="store_true", help="also print TensorFlow's log output (to stderr)"
    )


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return command_run(args)
    if args.command == "cluster":
        return command_cluster(args)
    if args.command == "launch":
        return command_launch(args)
    if args.command == "preflight":
        return command_preflight(args)
    if args.command == "submit":
        return command_submit(args)
    if args.command == "export":
        return command_export(args)
    if args.command == "validate":
        return command_validate(args.project)
    if args.command == "example":
        return command_example(args.name)
    if args.command == "devices":
        return command_devices()
    if args.command == "sweep":
        return command_sweep(args)
    if args.command == "lr-find":
        return command_lr_find(args)
    if args.command == "batch-find":
        return command_batch_find(args)
    if args.command == "mlflow":
        return command_mlflow(args)
    if args.command == "predict":
        return command_predict(args.run, args.inputs, as_json=args.json)
    build_parser().print_help()
    return EXIT_USAGE
