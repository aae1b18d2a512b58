"""``distloop submit``: the project's cluster as a Slurm batch job, a resume as a new
job, and ``--wait``/``--follow``; and the job's shape (nodes, tasks, time), which
``export --format slurm`` takes too."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..cluster_layout.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from ..problems import ProblemsError
from .common import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    _err,
    _load,
    announce_custom_code,
)
from .following import follow
from .mlflow_command import add_live_arguments, live_settings


def add_slurm_job_arguments(slurm: argparse._ActionsContainer) -> None:
    """The job's shape, for export --format slurm and submit alike."""
    from ..exports.slurm import SlurmJob

    slurm.add_argument("--nodes", type=int, default=SlurmJob.nodes, help="nodes (default 2)")
    slurm.add_argument(
        "--ntasks-per-node",
        type=int,
        default=SlurmJob.tasks_per_node,
        help="tasks on each node (default 1)",
    )
    slurm.add_argument("--time", help="the job's time limit, as sbatch takes it (e.g. 2:00:00)")
    slurm.add_argument("--partition", help="the partition to submit to")
    slurm.add_argument(
        "--port-base",
        type=int,
        default=SLURM_PORT_BASE,
        help=f"each node's first task port (default {SLURM_PORT_BASE})",
    )


def add_submit_command(commands: argparse._SubParsersAction) -> None:
    submit = commands.add_parser(
        "submit",
        help="submit the project's cluster as a Slurm batch job (sbatch) and, with --wait, "
        "follow it here",
    )
    source = submit.add_mutually_exclusive_group(required=True)
    source.add_argument("project", nargs="?", type=Path, help="project JSON file")
    source.add_argument(
        "--resume",
        metavar="RUN_DIR",
        type=Path,
        help="submit a new job that continues a stopped or failed run, from its checkpoint",
    )
    source.add_argument(
        "--follow", metavar="RUN_DIR", type=Path, help="follow the job that runs RUN_DIR"
    )
    submit.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="the job's folder, on a file system every node shares: the script, the project, "
        "the job's output and runs/<job id>/",
    )
    add_slurm_job_arguments(submit)
    add_live_arguments(submit)
    submit.add_argument(
        "--wait",
        action="store_true",
        help="follow the job to its end: its state, the chief's steps and evaluations; "
        "Ctrl-C stops it (scancel, every task saves a checkpoint), a second leaves it running",
    )
    submit.add_argument("--quiet", action="store_true", help="print only the summary")
    submit.add_argument(
        "--verbose", action="store_true", help="also print the chief's log output (to stderr)"
    )
    submit.set_defaults(handler=command_submit)


def command_submit(args: argparse.Namespace) -> int:
    """``distloop submit``: sbatch the project's cluster, or a resume; ``--wait`` follows it.
    ``--resume`` and ``--follow`` ask the run folder's job's scheduler, Slurm's or another's
    (``engine.cluster.scheduler``)."""
    from ..cluster.scheduler import SchedulerError, scheduler_named, scheduler_of
    from ..exports.slurm import SlurmJob

    try:
        if args.project is not None:
            if args.out is None:
                _err("distloop: submit needs --out DIR, the job's folder on the shared file system")
                return EXIT_USAGE
            project = _load(args.project)
            if project is None or not announce_custom_code(project, args.project.parent):
                return EXIT_FAILED
            job = SlurmJob(
                nodes=args.nodes,
                tasks_per_node=args.ntasks_per_node,
                time=args.time,
                partition=args.partition,
                port_base=args.port_base,
            )
            run = scheduler_named("slurm").submit(
                project, args.out, job, base_dir=args.project.parent
            )
        elif args.out is not None:
            _err("distloop: --resume and --follow keep the job's folder; drop --out")
            return EXIT_USAGE
        elif args.resume is not None:
            run = scheduler_of(args.resume).resubmit(args.resume)
        else:
            run = scheduler_of(args.follow).follow(args.follow)
    except (ProblemsError, SchedulerError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except OSError as exc:
        _err(f"distloop: cannot write the job's folder: {exc.strerror or exc}")
        return EXIT_FAILED
    if args.follow is None:
        print(f"submitted job {run.job_id}, run folder {run.run_dir}", flush=True)
    if not (args.wait or args.follow):
        _err(f"distloop: follow it with: distloop submit --follow {run.run_dir}")
        return EXIT_OK
    run.on_state = lambda state: _err(f"distloop: job {run.job_id}: {state}")
    code = follow(
        run,
        run.run_dir,
        quiet=args.quiet,
        verbose=args.verbose,
        mlflow=live_settings(args),
        stopping=(
            f"cancelling job {run.job_id} (scancel): every task stops at one step with a "
            "checkpoint",
            "to leave the job to Slurm",
            "no longer following the job",
        ),
    )
    if run.detached:
        _err(
            f"distloop: no longer following job {run.job_id}, which Slurm goes on with: "
            f"follow it with distloop submit --follow {run.run_dir}, cancel it with "
            f"scancel {run.job_id}"
        )
        return EXIT_INTERRUPTED
    return code
