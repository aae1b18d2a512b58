"""``shell``: ``run-<host>.sh``, per host, a script that starts that host's tasks, each as
``TF_CONFIG=... distloop run project.json --task TYPE:INDEX``."""

from __future__ import annotations

import re
import shlex

from ..cluster_layout import task_dir_name
from ..code_text import inert
from ..config import Project
from ..run_folder import PROJECT_FILE
from ..tf_config import TaskSpec, TFConfig, parse_address
from .base import SECURITY_NOTE, ExportRequest, comment_lines
from .cluster_format import ClusterFormat, task_env

_USAGE = """\
`run-<host>.sh` starts the tasks that live on that host. Copy this folder to every
host, then run each host's script (in any order: tasks wait for each other):

```sh
bash run-<host>.sh
```

Each task writes its run folder under `runs/`. The run's trace is the chief's
(worker 0's when there is no chief). Ctrl-C stops the script's tasks.
"""


class ShellFormat(ClusterFormat):
    name = "shell"
    description = "run-<host>.sh: per host, a script that starts that host's tasks"

    def cluster_files(
        self, project: Project, config: TFConfig, name: str, request: ExportRequest
    ) -> tuple[dict[str, str], str]:
        by_host: dict[str, list[TaskSpec]] = {}
        for task in config.tasks():
            host, _ = parse_address(config.address(task))
            by_host.setdefault(host, []).append(task)
        files = {
            f"run-{_file_safe(host)}.sh": _shell_script(config, host, tasks)
            for host, tasks in by_host.items()
        }
        return files, _USAGE


def _file_safe(host: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "_", host)


def _shell_script(config: TFConfig, host: str, tasks: list[TaskSpec]) -> str:
    names = ", ".join(str(t) for t in tasks)
    lines = [
        "#!/usr/bin/env bash",
        f"# Distloop: the tasks of this cluster that run on {inert(host)}: {names}.",
        "# Copy this folder to the host and run: bash " + f"run-{_file_safe(host)}.sh",
        "# Each task's run folder is runs/<type>-<index>/ beside this script.",
        "#",
        *comment_lines(SECURITY_NOTE, "# "),
        "set -euo pipefail",
        'cd "$(dirname "$0")"',
        "pids=()",
        "# Ctrl-C or a failed task ends every task this script started.",
        "trap 'kill \"${pids[@]}\" 2>/dev/null || true' EXIT",
    ]
    for task in tasks:
        lines += [
            f"TF_CONFIG={shlex.quote(task_env(config, task))} \\",
            f"  distloop run {PROJECT_FILE} --task {task} --out runs/{task_dir_name(task)} &",
            "pids+=($!)",
        ]
    lines += [
        "status=0",
        'for pid in "${pids[@]}"; do',
        '  wait "$pid" || status=$?',
        "done",
        'exit "$status"',
    ]
    return "\n".join(lines) + "\n"


FORMAT = ShellFormat()
