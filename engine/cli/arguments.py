"""Options several commands share, each worded once: ``--overwrite`` (a new run's folder
that holds an earlier run), ``--max-restarts`` (a cluster started again after a task died)
and ``--trust-launch`` (a launch's folder from elsewhere)."""

from __future__ import annotations

import argparse


def add_overwrite_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="empty the --out folder first when it holds an earlier run (which is lost); "
        "a folder that holds anything a run does not write is never emptied",
    )


def add_max_restarts_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-restarts",
        type=int,
        default=0,
        metavar="N",
        help="when a task dies or is preempted, start the whole cluster again from its last "
        "checkpoint, up to N times (default 0)",
    )


# --- clusters: distloop cluster / export -------------------------------------------------


def add_trust_launch_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trust-launch",
        action="store_true",
        help="with --resume or --dump of a launch's folder made by another user or machine: "
        "run the ssh configuration and host commands it names (said before it runs)",
    )
