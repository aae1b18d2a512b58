"""A project's cluster as files for real hosts: TF_CONFIGs, scripts, Kubernetes (TF-free).

``distloop export`` and the export dialog write one format per folder with
:func:`export_cluster`; each format is a plug-in, ``engine/exports/<name>.py``, found by
its name (:mod:`engine.exports` lists them and says what each writes).

Every folder also gets ``project.json`` (its ``tf_config`` is the exported
cluster) and a ``README.md``, which lists what the hosts or pods need
(:func:`engine.exports.storage.storage_notes`: the project's local paths, and on
Kubernetes where the run folders live). The pod formats take an image, a runs volume
and a data volume (PersistentVolumeClaim names); without a runs volume the run folders
are an ``emptyDir``, lost with the pod.
"""

from __future__ import annotations

from pathlib import Path

from .config import Project
from .exports import ExportRequest, format_named, pod_formats
from .exports.base import PodStorage
from .exports.pods import DEFAULT_IMAGE, valid_image
from .exports.slurm import SlurmJob
from .exports.storage import volume_name_problem
from .fileio import atomic_write_text
from .problems import Problem, ProblemsError
from .tf_config import TFConfig


def export_cluster(
    project: Project,
    out_dir: Path,
    fmt: str,
    *,
    tf_config: TFConfig | None = None,
    image: str = DEFAULT_IMAGE,
    base_dir: Path | None = None,
    runs_volume: str | None = None,
    data_volume: str | None = None,
    slurm: SlurmJob | None = None,
) -> list[Path]:
    """Writes ``fmt``'s files for the project's cluster (or ``tf_config``'s) into ``out_dir``.

    ``base_dir`` is the project file's folder (its relative paths start there);
    ``runs_volume`` and ``data_volume`` name PersistentVolumeClaims (the pod formats);
    ``slurm`` shapes the ``slurm`` format's job. Returns the files written. Raises
    ProblemsError when there is no cluster to export or it cannot run under the
    project's strategy, ValueError for an unknown format, or a volume that is no
    Kubernetes name or whose format has none.
    """
    export_format = format_named(fmt)
    volumes = {"runs volume": runs_volume, "data volume": data_volume}
    for what, claim in volumes.items():
        if claim is None:
            continue
        if not export_format.pods:
            raise ValueError(f"a {what} is for the {pod_formats()} formats")
        problem = volume_name_problem(claim)
        if problem is not None:
            raise ValueError(f"{what}: {problem}")
    if export_format.pods and not valid_image(image):
        raise ProblemsError(
            [
                Problem(
                    (),
                    f"{image!r} is not a container image reference; write "
                    "[registry[:port]/]name[:tag][@digest], e.g. registry.example.org/distloop:1.0",
                )
            ],
            "export",
        )
    request = ExportRequest(
        project=project,
        base_dir=base_dir,
        tf_config=tf_config,
        image=image,
        storage=PodStorage(runs_volume, data_volume),
        slurm=slurm,
    )
    return _write_files(out_dir, export_format.files(request))


def _write_files(out_dir: Path, files: dict[str, str]) -> list[Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for relative, text in files.items():
        path = out_dir / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)
        if relative.endswith((".sh", ".sbatch")):
            path.chmod(0o755)
        written.append(path)
    return written
