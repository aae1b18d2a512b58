"""``distloop`` subcommands that need no window: run, cluster, export, validate, predict, ...

Errors a user can fix (a bad project, a missing file) are printed as plain
messages with a non-zero exit; a traceback appears only for an unexpected engine
failure (not one of ``engine.child_main.KNOWN_FAILURES``), after the message, as the
engine's own report.

Every command opens its runs through :mod:`engine.run_start` (the run folder made and
claimed, the run opened), whose refusal :func:`main` prints as one line.

Each command's module builds its own parser and names its handler; this package puts
the parsers together in ``--help``'s order and calls the handler. Its names
(``__all__``) are what the rest of Distloop imports (the launcher, ``gui.launcher``, and
``python -m distloop.engine``):

- :mod:`.common`: the exit codes, the error line, loading a project, the checks before a
  run starts here, and announcing the custom code a run will execute.
- :mod:`.following`: a run in the foreground: its messages printed, Ctrl-C and SIGTERM
  answered, a cluster restarted after a task died (``--max-restarts``).
- :mod:`.project_commands`: ``validate``, ``example``, ``devices`` and ``predict``.
- :mod:`.run_commands`: ``run`` and ``run --resume`` (a requeued Slurm task's included).
- :mod:`.arguments`: the options several commands share (``--overwrite``,
  ``--max-restarts``, ``--trust-launch``).
- :mod:`.cluster_commands`: ``cluster``, its ``--resume`` and ``--dump``.
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

from .. import __version__
from ..run_start import RunRefused
from ..study.command import add_sweep_command
from .cluster_commands import add_cluster_command
from .common import EXIT_FAILED, EXIT_USAGE, _err
from .export_command import add_export_command
from .finder_commands import add_finder_commands
from .launch_commands import add_launch_commands
from .mlflow_command import add_mlflow_command
from .project_commands import add_project_commands
from .run_commands import add_run_command
from .submit_command import add_submit_command

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
    """Every command's parser, each built by its own module, in the order ``--help`` lists
    them; each sets ``handler``, the function :func:`main` calls with the parsed arguments."""
    parser = argparse.ArgumentParser(
        prog="distloop",
        description="Configure and run TensorFlow distributed training with custom loops. "
        "Without a command, opens the desktop app.",
    )
    parser.add_argument("--version", action="version", version=f"distloop {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_run_command(commands)
    add_cluster_command(commands)
    add_launch_commands(commands)
    add_submit_command(commands)
    add_export_command(commands)
    add_sweep_command(commands)
    add_finder_commands(commands)
    add_mlflow_command(commands)
    add_project_commands(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return args.handler(args)
    except RunRefused as exc:  # engine.run_start: the run folder could not be claimed, ...
        _err(f"distloop: {exc}")
        return EXIT_USAGE if exc.usage else EXIT_FAILED
