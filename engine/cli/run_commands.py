"""``distloop run``: one engine process, a whole run or one task of a cluster (``--task``,
``--task-from slurm``), and ``run --resume``, a requeued Slurm job's task included."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ..cluster_layout import task_dir_name
from ..cluster_layout.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from ..examples import load_example
from ..problems import ProblemsError
from ..resume_rules import Layout, refuse_strategy
from ..run_folder import MESSAGES_FILE, PROJECT_FILE, TASKS_DIR, new_run_dir
from ..run_start import RunRequest, open_requested, resumable
from ..tf_config import chief_of
from .arguments import add_overwrite_argument
from .common import (
    EXIT_FAILED,
    EXIT_USAGE,
    _err,
    _load,
    _may_start_here,
    _no_example,
    announce_custom_code,
)
from .following import run_in_foreground
from .mlflow_command import add_live_arguments, live_settings, worker_live_refusal


def add_run_command(commands: argparse._SubParsersAction) -> None:
    """``distloop run``'s parser: a project, an example or a run to resume, here or as one
    task of a cluster."""
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
    run.set_defaults(handler=command_run)


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


def command_run(args: argparse.Namespace) -> int:
    refusal = worker_live_refusal(args)
    if refusal is not None:
        _err(refusal)
        return EXIT_USAGE
    if args.resume:
        return command_resume(args)
    if args.example:
        try:
            project = load_example(args.example)
        except KeyError:
            _err(_no_example(args.example))
            return EXIT_USAGE
    else:
        project = _load(args.project)
        if project is None:
            return EXIT_FAILED
    from ..cluster_layout import tf_config_for_run
    from ..cluster_layout.slurm import tf_config_from_slurm

    try:
        if args.task_from == "slurm":
            slurm = tf_config_from_slurm(
                os.environ, project.strategy.kind, port_base=args.port_base
            )
            args.task = str(slurm.task)
            args.out = (
                (args.out or new_run_dir(project.name)) / TASKS_DIR / task_dir_name(slurm.task)
            )
            project = project.model_copy(update={"tf_config": slurm})
        # The cluster Slurm laid out wins over a TF_CONFIG the job's environment inherited.
        environ = {} if args.task_from else None
        project = project.model_copy(
            update={"tf_config": tf_config_for_run(project, args.task, environ)}
        )
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    if not announce_custom_code(project, args.project.parent if args.project else None):
        return EXIT_FAILED
    # A cluster task (--task) may be a ps server that reads no data: the engine decides.
    if not args.task and not _may_start_here(project, str(args.project or args.example)):
        return EXIT_FAILED
    opened = open_requested(RunRequest(project, args.out, overwrite=args.overwrite))
    return run_in_foreground(
        opened,
        quiet=args.quiet,
        verbose=args.verbose,
        as_messages=args.messages,
        record_messages=args.record_messages,
        mlflow=live_settings(args),
    )


def command_resume(args: argparse.Namespace) -> int:
    run_dir: Path = args.resume
    if args.out is not None or args.overwrite:
        _err("distloop: --resume continues in the run's own folder; drop --out/--overwrite")
        return EXIT_USAGE
    if args.task_from == "slurm":
        return resume_slurm_task(run_dir, port_base=args.port_base, args=args)
    run = resumable(run_dir, Layout.RUN)
    if not announce_custom_code(run.project, None):
        return EXIT_FAILED
    opened = open_requested(RunRequest(run.project, run_dir, resume=True))
    return run_in_foreground(
        opened,
        quiet=args.quiet,
        verbose=args.verbose,
        as_messages=args.messages,
        record_messages=args.record_messages,
        mlflow=live_settings(args),
    )


def resume_slurm_task(run_dir: Path, *, port_base: int, args: argparse.Namespace) -> int:
    """One task of a requeued Slurm job: its folder under ``run_dir``, the chief's checkpoint.

    The nodes may differ from the first start's, so the TF_CONFIG is Slurm's new one;
    a trainer that is not the chief takes the chief's checkpoints first, as a local
    cluster's resume gives them (only the chief keeps them). The chief writes none
    before every task has joined its first step, so the copy is whole.
    """
    from ..cluster.top_folder import ClusterFolder
    from ..cluster_layout.slurm import tf_config_from_slurm

    # multi_worker_mirrored's chief, worker 0: the only multi-machine strategy that resumes.
    chief_dir = run_dir / TASKS_DIR / task_dir_name(chief_of({"worker": ()}))
    project = _load(chief_dir / PROJECT_FILE) if (chief_dir / PROJECT_FILE).is_file() else None
    if project is None:
        _err(f"distloop: {run_dir} holds no Slurm run of multi_worker_mirrored to resume")
        return EXIT_FAILED
    try:
        refuse_strategy(project)
        config = tf_config_from_slurm(os.environ, project.strategy.kind, port_base=port_base)
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    task_dir = run_dir / TASKS_DIR / task_dir_name(config.task)
    if not (task_dir / PROJECT_FILE).is_file():
        _err(f"distloop: {config.task} never started in {run_dir}: resume with the job's shape")
        return EXIT_FAILED
    opened = open_requested(
        RunRequest(project.model_copy(update={"tf_config": config}), task_dir, resume=True)
    )
    if task_dir != chief_dir:  # the folder is claimed; nothing is written until the start
        ClusterFolder(run_dir, lambda *_: None).share_chief_checkpoint(
            chief_dir.name, [task_dir.name]
        )
    return run_in_foreground(
        opened,
        quiet=args.quiet,
        verbose=args.verbose,
        as_messages=args.messages,
        record_messages=args.record_messages,
        mlflow=live_settings(args),
    )
