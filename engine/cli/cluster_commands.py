"""``distloop cluster``: every task of a project on this machine, its ``--resume``, and
``--dump``: where each task of a cluster that seems hung stands (a launch's or a Slurm
job's too).

"""

from __future__ import annotations

import argparse
import json
import socket
from pathlib import Path
from typing import Any

from ..cluster.ssh import SshLaunch
from ..cluster_layout import local_cluster_tasks
from ..problems import ProblemsError
from ..resume_rules import Layout, checked_launch_settings
from ..run_folder import PROJECT_FILE, TASKS_DIR, RunFolderError, read_status
from ..run_start import RunRequest, open_requested, resumable
from ..tf_config import DEFAULT_WORKERS
from .arguments import (
    add_max_restarts_argument,
    add_overwrite_argument,
    add_trust_launch_argument,
)
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    _err,
    _load,
    _may_start_here,
    announce_custom_code,
)
from .following import follow_restarting
from .launch_commands import announce_launch, made_here_or_trusted
from .mlflow_command import add_live_arguments


def add_cluster_command(commands: argparse._SubParsersAction) -> None:
    """``distloop cluster``'s parser: every task of a project on this machine."""
    cluster = commands.add_parser(
        "cluster",
        help="run every task of a multi-worker or parameter-server project on this machine",
    )
    source = cluster.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument(
        "--resume",
        metavar="DIR",
        type=Path,
        help="continue a stopped, failed or killed multi-worker cluster run, every task from "
        "the chief's last checkpoint",
    )
    source.add_argument(
        "--dump",
        metavar="DIR",
        type=Path,
        help="a running cluster that seems hung: every task writes its Python stacks into "
        "its folder (stacks.txt), and the task not where its peers wait is named",
    )
    source.add_argument(  # a launch's side on a task's host, over ssh: JSON on stdout
        "--dump-task", metavar="DIR", type=Path, help=argparse.SUPPRESS
    )
    cluster.add_argument(
        "--out", type=Path, help="run folder (default: a new folder under the user's data dir)"
    )
    add_overwrite_argument(cluster)
    cluster.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=f"number of worker tasks (default: the project's tf_config, else {DEFAULT_WORKERS})",
    )
    add_max_restarts_argument(cluster)
    add_live_arguments(cluster)
    add_trust_launch_argument(cluster)
    cluster.add_argument(
        "--quiet", action="store_true", help="print only the summary, not a line per step"
    )
    cluster.add_argument(
        "--verbose", action="store_true", help="also print every task's log output (to stderr)"
    )
    cluster.set_defaults(handler=command_cluster)


def command_cluster(args: argparse.Namespace) -> int:
    if args.resume is not None:
        return command_cluster_resume(args)
    if args.dump is not None:
        return command_cluster_dump(args.dump, trust_launch=args.trust_launch)
    if args.dump_task is not None:
        from ..stack_dumps import ask_task_folder

        print(json.dumps(ask_task_folder(args.dump_task)))
        return EXIT_OK
    project = _load(args.project)
    if project is None or not announce_custom_code(project, args.project.parent):
        return EXIT_FAILED
    if args.workers is not None and args.workers < 1:
        _err("distloop: --workers must be at least 1")
        return EXIT_USAGE
    try:
        tasks = len(local_cluster_tasks(project, args.workers))
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    if not _may_start_here(project, str(args.project), processes=tasks):
        return EXIT_FAILED
    request = RunRequest(
        project,
        args.out,
        overwrite=args.overwrite,
        command="cluster",
        layout="cluster",
        workers=args.workers,
    )
    return follow_restarting(open_requested(request), args, request)


def command_cluster_dump(run_dir: Path, *, trust_launch: bool = False) -> int:
    """``distloop cluster --dump DIR``: where each task of the running cluster stands, a
    local cluster's or a submitted batch job's (Slurm's or another scheduler's)."""
    from ..cluster.scheduler import job_run_scheduler
    from ..stack_dumps import ask_for_stacks, diagnose

    status = read_status(run_dir)
    if job_run_scheduler(run_dir) is not None:
        return _dump_job(run_dir)
    tasks = status.get("tasks")
    if status.get("status") != "running" or not isinstance(tasks, dict):
        _err(f"distloop: {run_dir} holds no running cluster (its status.json lists no tasks)")
        return EXIT_FAILED
    if status.get("host") not in (None, socket.gethostname()):
        _err(f"distloop: the cluster runs on {status['host']}: run --dump there")
        return EXIT_FAILED
    if isinstance(status.get("launch"), dict):
        return _dump_launch(run_dir, status["launch"], trust_launch)
    found = {
        name: (info["pid"], run_dir / info["run_dir"])
        for name, info in tasks.items()
        if isinstance(info, dict)
        and isinstance(info.get("pid"), int)
        and isinstance(info.get("run_dir"), str)
        and not Path(info["run_dir"]).is_absolute()
        and ".." not in Path(info["run_dir"]).parts
    }
    stacks = ask_for_stacks(found)
    for line in diagnose(stacks):
        print(line)
    _err(f"distloop: each task's stacks: {run_dir / TASKS_DIR}/*/stacks.txt")
    return EXIT_OK


def _dump_launch(run_dir: Path, raw_settings: dict[str, Any], trusted: bool) -> int:
    """The dump of a launch: its tasks are on their hosts (the pids in its status.json are
    its ssh clients'), so each host is asked over ssh, as the launcher itself does."""
    from ..stack_dumps import diagnose

    project = _load(run_dir / PROJECT_FILE)
    if project is None:
        return EXIT_FAILED
    try:
        settings = checked_launch_settings(run_dir, raw_settings)
    except RunFolderError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    hosts = SshLaunch.from_settings(settings, project)
    announce_launch(project, hosts)
    if not made_here_or_trusted(project, hosts, settings, run_dir, trusted):
        hosts.close()
        return EXIT_FAILED
    try:
        config = hosts.tf_config(project)
        stacks = hosts.ask_for_stacks(config, config.tasks())
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    finally:
        hosts.close()
    for line in diagnose(stacks):
        print(line)
    _err("distloop: each task's stacks: " + ", ".join(s.file for s in stacks if s.file))
    return EXIT_OK


def _dump_job(run_dir: Path) -> int:
    """The dump of a job ``distloop submit`` submitted: its scheduler signals its tasks
    (Slurm's scancel)."""
    from ..cluster.scheduler import ASK_TIMEOUT_S, SchedulerError, scheduler_of

    try:
        scheduler = scheduler_of(run_dir)
        job_id = scheduler.follow(run_dir).job_id
        state = scheduler.state(job_id, timeout_s=ASK_TIMEOUT_S)
        if not state.running:
            raise SchedulerError(f"job {job_id} is {state}, not running: no stacks to ask for")
        lines = scheduler.dump_stacks(run_dir, job_id)
    except SchedulerError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    for line in lines:
        print(line)
    _err(f"distloop: each task's stacks: {run_dir / TASKS_DIR}/*/stacks.txt")
    return EXIT_OK


def command_cluster_resume(args: argparse.Namespace) -> int:
    """``distloop cluster --resume DIR``: the same tasks, each in its own folder."""
    run_dir: Path = args.resume
    if args.out is not None or args.workers is not None or args.overwrite:
        _err(
            "distloop: --resume continues the cluster's tasks in its folder; "
            "drop --out/--workers/--overwrite"
        )
        return EXIT_USAGE
    run = resumable(run_dir, Layout.CLUSTER)
    if not announce_custom_code(run.project, None):
        return EXIT_FAILED
    request = RunRequest(run.project, run_dir, resume=True, layout="cluster")
    return follow_restarting(open_requested(request), args, request)
