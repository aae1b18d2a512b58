"""``distloop export``: a project written out to run elsewhere: every task's TF_CONFIG,
launch scripts, Kubernetes manifests, a Slurm job, or a standalone TensorFlow script
(``--format script``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..config import Project
from ..problems import ProblemsError
from .common import EXIT_FAILED, EXIT_OK, EXIT_USAGE, _err, _load
from .submit_command import add_slurm_job_arguments

SCRIPT_FORMAT = "script"
"""``--format script``: the project as one standalone TensorFlow program, not a cluster
(``engine.script_export``), so no export format of ``engine.exports``."""


def _volume_name(text: str) -> str:
    from ..exports.storage import volume_name_problem

    problem = volume_name_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def add_export_command(commands: argparse._SubParsersAction) -> None:
    """``distloop export``'s parser: the formats are the registered ones (``engine.exports``),
    and the standalone script."""
    from ..exports import FORMATS, format_named, pod_formats
    from ..exports.pods import DEFAULT_IMAGE
    from ..exports.storage import DATA_MOUNT

    export = commands.add_parser(
        "export",
        help="write a standalone training script, the TF_CONFIG of every task, launch scripts "
        "or Kubernetes manifests",
    )
    export.add_argument("project", type=Path, help="project JSON file")
    described = "; ".join(f"{name}: {format_named(name).description}" for name in FORMATS)
    export.add_argument(
        "--format",
        required=True,
        choices=(*FORMATS, SCRIPT_FORMAT),
        help=f"{described}; {SCRIPT_FORMAT}: the project as one standalone TensorFlow program "
        "(--out is the .py file)",
    )
    pods = pod_formats()
    export.add_argument(
        "--out", type=Path, required=True, help="folder to write into (script: the .py file)"
    )
    export.add_argument(
        "--tf-config",
        type=Path,
        metavar="FILE",
        help="take the cluster from this TF_CONFIG JSON file instead of the project",
    )
    export.add_argument(
        "--image",
        default=DEFAULT_IMAGE,
        help=f"image with Distloop installed, for {pods} (default {DEFAULT_IMAGE})",
    )
    export.add_argument(
        "--runs-volume",
        type=_volume_name,
        metavar="CLAIM",
        help=f"{pods}: a PersistentVolumeClaim for the run folders, which stay after the "
        "pods end (default: an emptyDir, lost with the pod)",
    )
    export.add_argument(
        "--data-volume",
        type=_volume_name,
        metavar="CLAIM",
        help=f"{pods}: a PersistentVolumeClaim holding the files the project reads, "
        f"mounted read-only; project.json reads them from {DATA_MOUNT}",
    )

    add_slurm_job_arguments(export.add_argument_group("slurm format"))
    export.set_defaults(handler=command_export)


def command_export(args: argparse.Namespace) -> int:
    from ..export import export_cluster
    from ..exports import format_named, pod_formats
    from ..exports.base import SECURITY_NOTE
    from ..exports.slurm import SlurmJob
    from ..exports.storage import storage_notes
    from ..tf_config import parse_tf_config_text

    project = _load(args.project)
    if project is None:
        return EXIT_FAILED
    volumes = {"--runs-volume": args.runs_volume, "--data-volume": args.data_volume}
    given = [flag for flag, claim in volumes.items() if claim is not None]
    pods = args.format != SCRIPT_FORMAT and format_named(args.format).pods
    if given and not pods:
        _err(f"distloop: {' and '.join(given)} apply to --format {pod_formats()}")
        return EXIT_USAGE
    if args.format == SCRIPT_FORMAT:
        return export_script(project, args.out)
    try:
        tf_config = None
        if args.tf_config is not None:
            tf_config = parse_tf_config_text(args.tf_config.read_text(encoding="utf-8"))
        slurm = SlurmJob(
            nodes=args.nodes,
            tasks_per_node=args.ntasks_per_node,
            time=args.time,
            partition=args.partition,
            port_base=args.port_base,
        )
        files = export_cluster(
            project,
            args.out,
            args.format,
            tf_config=tf_config,
            image=args.image,
            base_dir=args.project.parent,
            runs_volume=args.runs_volume,
            data_volume=args.data_volume,
            slurm=slurm,
        )
    except ProblemsError as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    except (OSError, UnicodeDecodeError) as exc:
        _err(f"distloop: {exc}")
        return EXIT_FAILED
    for path in files:
        print(path)
    notes = storage_notes(
        project,
        args.format,
        base_dir=args.project.parent,
        runs_volume=args.runs_volume,
        data_volume=args.data_volume,
    )
    for note in notes:
        _err(f"distloop: warning: {note}")
    _err(f"distloop: {SECURITY_NOTE}")
    return EXIT_OK


def export_script(project: Project, out: Path) -> int:
    """``distloop export --format script``: the run as a standalone TensorFlow program."""
    from ..fileio import atomic_write_text
    from ..script_export import ExportError, render_script

    try:
        atomic_write_text(out, render_script(project))
    except ExportError as exc:
        _err(f"distloop: cannot export {project.name!r} as a script: {exc}")
        return EXIT_FAILED
    except OSError as exc:
        _err(f"distloop: cannot write {out}: {exc.strerror or exc}")
        return EXIT_FAILED
    print(out)
    return EXIT_OK
