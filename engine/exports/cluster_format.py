"""The formats that export the project's own cluster (``json``, ``shell``, ``k8s``,
``tfjob``): the cluster checked, the exported ``project.json`` and the README are the same
for each, so a format writes only its own files (:meth:`ClusterFormat.cluster_files`)."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path

from ..cluster_layout import run_problems
from ..code_text import inert
from ..config import Project
from ..problems import Problem, ProblemsError
from ..project_file import load_project_data
from ..run_folder import PROJECT_FILE
from ..tf_config import TaskSpec, TFConfig
from .base import ExportFormat, ExportRequest, cluster_name, readme_text
from .storage import data_volume_paths, storage_notes


class ClusterFormat(ExportFormat):
    """A format whose files start every task of the project's cluster (or of the
    TF_CONFIG the request gives), checked to run under the project's strategy."""

    def cluster_config(self, config: TFConfig, name: str) -> TFConfig:
        """The cluster as its tasks will reach each other (Kubernetes: by pod names)."""
        return config

    @abstractmethod
    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        """Its own files beside ``project.json`` and README.md, and the README's usage
        text. ``project`` is the exported project; ``config`` its cluster."""

    def files(self, request: ExportRequest) -> dict[str, str]:
        project = request.project
        config = request.tf_config or project.tf_config
        if config is None:
            raise ProblemsError(
                [
                    Problem(
                        ("tf_config",),
                        "export needs a cluster: set the project's tf_config, or pass a "
                        "TF_CONFIG file",
                    )
                ],
                "export",
            )
        chief = config.chief_task()
        config = config.for_task(chief.type, chief.index)
        problems = run_problems(config, project.strategy.kind)
        if problems:
            raise ProblemsError(problems, "export")
        name = cluster_name(project)
        config = self.cluster_config(config, name)
        storage = request.storage
        notes = storage_notes(
            project,
            self.name,
            base_dir=request.base_dir,
            runs_volume=storage.runs_volume,
            data_volume=storage.data_volume,
        )
        if self.pods and request.base_dir is not None:
            # A pod reads project.json from a read-only ConfigMap: nothing can sit beside it.
            project = project.resolve_paths(request.base_dir)
        if storage.data_volume:
            project = _on_data_volume(project, request.base_dir)
        exported = project.model_copy(update={"tf_config": config})
        own, usage = self.cluster_files(exported, config, name, request)
        tasks = "\n".join(f"- `{task}`: {inert(config.address(task))}" for task in config.tasks())
        return {
            PROJECT_FILE: exported.to_json(),
            **own,
            "README.md": readme_text(exported, self.name, f"Tasks:\n\n{tasks}\n\n{usage}", notes),
        }


def task_env(config: TFConfig, task: TaskSpec) -> str:
    """The TF_CONFIG of ``config``'s task ``task``, as its environment holds it."""
    return config.for_task(task.type, task.index).to_env()


def _on_data_volume(project: Project, base_dir: Path | None) -> Project:
    """The project reading every local path from the data volume's mount."""
    data = project.model_dump(mode="json")
    for field, path in data_volume_paths(project, base_dir).items():
        *sections, name = field.split(".")
        section = data
        for key in sections:
            section = section[key]
        section[name] = path
    return load_project_data(data, "export")
