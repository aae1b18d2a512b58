"""``json``: ``tf_config/<type>-<index>.json``, each task's TF_CONFIG, for the user's own
launcher."""

from __future__ import annotations

from ..cluster_layout import task_dir_name
from ..config import Project
from ..tf_config import TFConfig
from .base import ExportRequest
from .cluster_format import ClusterFormat, task_env

_USAGE = """\
`tf_config/<type>-<index>.json` holds each task's TF_CONFIG. On each host, for each
of its tasks:

```sh
TF_CONFIG="$(cat tf_config/worker-1.json)" distloop run project.json
```

A TF_CONFIG in the environment wins over the project's `tf_config`, and its `task`
says which task the process is.
"""


class JsonFormat(ClusterFormat):
    name = "json"
    description = "tf_config/<type>-<index>.json: each task's TF_CONFIG, for your own launcher"

    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        files = {
            f"tf_config/{task_dir_name(task)}.json": task_env(config, task) + "\n"
            for task in config.tasks()
        }
        return files, _USAGE


FORMAT = JsonFormat()
