"""``slurm``: ``slurm.sbatch``, a batch script whose tasks each compute their TF_CONFIG from
Slurm's variables (``engine.cluster_layout.slurm``), so it needs no cluster in the project; and
:class:`SlurmJob`, the job's shape, which ``distloop submit`` and the window's Slurm
dialog ask for too."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from ..cluster_layout.slurm import DEFAULT_PORT_BASE as SLURM_PORT_BASE
from ..code_text import shown
from ..problems import Problem, ProblemsError
from ..run_folder import PROJECT_FILE
from ..tf_config import DEFAULT_WORKERS, MULTI_MACHINE_STRATEGIES
from .base import (
    SECURITY_NOTE,
    ExportFormat,
    ExportRequest,
    cluster_name,
    comment_lines,
    readme_text,
)
from .storage import storage_notes


class SlurmFormat(ExportFormat):
    name = "slurm"
    description = (
        "slurm.sbatch: a batch job whose tasks take their TF_CONFIG from Slurm "
        "(one node per task of the TF_CONFIG tab's cluster, else 2)"
    )
    needs_tf_config = False

    def files(self, request: ExportRequest) -> dict[str, str]:
        project, base_dir = request.project, request.base_dir
        job = request.slurm or SlurmJob()
        if job.nodes is None:
            cluster = project.tf_config
            nodes = len(cluster.tasks()) if cluster else DEFAULT_WORKERS
            per_node = max(1, job.tasks_per_node)  # a count below 1 is the problem said below
            job = replace(job, nodes=max(1, nodes // per_node))
        problems = job.problems(project.strategy.kind)
        if problems:
            raise ProblemsError(problems, "export")
        usage = _USAGE.format(
            nodes=job.nodes,
            per_node=job.tasks_per_node,
            tasks=job.nodes * job.tasks_per_node,
            port=job.port_base,
        )
        notes = storage_notes(project, "slurm", base_dir=base_dir)
        if base_dir is not None:  # the job reads the project from the export folder
            project = project.resolve_paths(base_dir)
        return {
            PROJECT_FILE: project.to_json(),
            SBATCH_FILE: sbatch_script(cluster_name(project), PROJECT_FILE, job),
            "README.md": readme_text(project, "slurm", usage, notes),
        }


@dataclass(frozen=True)
class SlurmJob:
    """What ``sbatch`` is asked for: the step's shape, and where and how long it may run."""

    nodes: int | None = None
    """None: one node per task of the project's cluster, else :data:`DEFAULT_WORKERS`."""
    tasks_per_node: int = 1
    time: str | None = None
    partition: str | None = None
    port_base: int = SLURM_PORT_BASE

    def problems(self, strategy_kind: str) -> list[Problem]:
        found = []
        if not 1 <= self.nodes <= 10_000:
            found.append(Problem(("nodes",), f"{self.nodes} nodes: give 1 to 10000"))
        if not 1 <= self.tasks_per_node <= 1024:
            found.append(Problem(("ntasks_per_node",), "give 1 to 1024 tasks per node"))
        if self.time is not None:
            found += [Problem(("time",), message) for message in _time_problems(self.time)]
        if self.partition is not None and not _SLURM_NAME.fullmatch(self.partition):
            found.append(
                Problem(("partition",), f"{shown(self.partition)} is not a partition name")
            )
        if not 1 <= self.port_base <= 65535 - self.tasks_per_node + 1:
            found.append(Problem(("port_base",), "the tasks' ports must fit in 1-65535"))
        tasks = self.nodes * self.tasks_per_node
        if strategy_kind == "parameter_server" and tasks < 3:
            found.append(
                Problem(
                    ("nodes",), f"parameter_server needs 3 tasks (chief, ps, worker), not {tasks}"
                )
            )
        elif strategy_kind not in MULTI_MACHINE_STRATEGIES:
            found.append(
                Problem(
                    ("strategy", "kind"),
                    f"a Slurm job runs {' or '.join(MULTI_MACHINE_STRATEGIES)}, "
                    f"not {strategy_kind}",
                )
            )
        return found


def _time_problems(time: str) -> list[str]:
    """Why sbatch would refuse ``--time``, or read it as another limit than was meant.

    Slurm holds a limit as minutes in 32 bits, its largest value meaning no limit: a
    larger number is not a longer job but a job sbatch refuses, or one whose limit
    wraps. ``UNLIMITED``/``INFINITE`` say no limit in Slurm's own words.
    """
    if time in ("UNLIMITED", "INFINITE"):
        return []
    match = _SLURM_TIME.fullmatch(time)
    if match is None:
        return [f"{shown(time)} is not a Slurm time (e.g. 90, 1:30:00, 2-0)"]
    if _time_minutes(match) > MAX_SLURM_MINUTES:
        return [f"{shown(time)} is longer than Slurm's longest limit: give UNLIMITED"]
    return []


def _time_minutes(match: re.Match[str]) -> float:
    """The minutes of a ``--time`` in any of sbatch's forms: ``M``, ``M:S``, ``H:M:S``,
    ``D-H``, ``D-H:M``, ``D-H:M:S``."""
    days, clock = match.group("days"), [int(part) for part in match.group("clock").split(":")]
    if days is None:
        seconds = {1: [60], 2: [60, 1], 3: [3600, 60, 1]}[len(clock)]
        return sum(a * b for a, b in zip(clock, seconds, strict=True)) / 60
    seconds = [3600, 60, 1][: len(clock)]
    return int(days) * 1440 + sum(a * b for a, b in zip(clock, seconds, strict=True)) / 60


MAX_SLURM_MINUTES = 2**32 - 3
"""Slurm's longest finite time limit: a uint32 of minutes, the top two values meaning
"infinite" and "not set"."""
_SLURM_TIME = re.compile(
    r"(?:(?P<days>[0-9]{1,30})-)?(?P<clock>[0-9]{1,30}(?::[0-9]{1,2}){0,2})", re.ASCII
)
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
SBATCH_FILE = "slurm.sbatch"
STOP_WARNING_S = 120
"""Seconds before the time limit at which Slurm sends SIGTERM: a stop at the next step
with a checkpoint, well before the SIGKILL."""


def sbatch_script(job_name: str, project_file: str, job: SlurmJob) -> str:
    """The batch script: every task one ``distloop run --task-from slurm``, and a job that
    Slurm requeues (preemption, ``scontrol requeue``) resumes from its last checkpoint, as
    does a new job given ``DISTLOOP_RESUME=1`` and an earlier job's ``DISTLOOP_RUN_DIR``
    (``distloop submit --resume``); any other job starts afresh, so a job id Slurm hands
    out again never continues another job's run. The chief's messages go to its
    ``messages.jsonl`` too, where ``distloop submit --wait`` follows them.

    ``job_name`` and ``project_file`` are the exporter's own (already safe) names; every
    value here is validated, and the run folder is quoted, so nothing in the script is
    text a user could turn into a command.
    """
    directives = [
        f"--job-name={job_name}",
        f"--nodes={job.nodes}",
        f"--ntasks-per-node={job.tasks_per_node}",
        *([f"--time={job.time}"] if job.time else []),
        *([f"--partition={job.partition}"] if job.partition else []),
        f"--signal=TERM@{STOP_WARNING_S}",
        "--requeue",
        "--open-mode=append",
        "--output=slurm-%j.out",
    ]
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            *(f"#SBATCH {directive}" for directive in directives),
            "# Distloop: submit from this folder with `sbatch slurm.sbatch`. Every task computes",
            "# its TF_CONFIG from Slurm's variables; the run folder is runs/<job id>/ here",
            "# (DISTLOOP_RUN_DIR chooses another). DISTLOOP is the command that runs distloop",
            "# on the nodes (default: distloop). A requeued job resumes from its checkpoint, as",
            "# does one given DISTLOOP_RESUME=1 and an earlier job's DISTLOOP_RUN_DIR.",
            "#",
            *comment_lines(SECURITY_NOTE, "# "),
            "set -euo pipefail",
            'cd "${SLURM_SUBMIT_DIR:-.}"',
            'run_dir="${DISTLOOP_RUN_DIR:-runs/$SLURM_JOB_ID}"',
            'if [ -d "$run_dir/tasks" ] && { [ "${SLURM_RESTART_COUNT:-0}" -gt 0 ] '
            '|| [ -n "${DISTLOOP_RESUME:-}" ]; }; then',
            '  start=(--resume "$run_dir")',
            "else",
            f'  start=({project_file} --out "$run_dir")',
            "fi",
            "# shellcheck disable=SC2086 (DISTLOOP may be a command with arguments)",
            "srun --distribution=block --kill-on-bad-exit=1 ${DISTLOOP:-distloop} run "
            f'"${{start[@]}}" --task-from slurm --port-base {job.port_base} --record-messages',
            "",
        ]
    )


_USAGE = """\
`slurm.sbatch` asks for {nodes} node(s) with {per_node} task(s) each ({tasks} tasks). Every
task runs `distloop run project.json --task-from slurm`, which computes its TF_CONFIG
from Slurm's variables: ranks fill the nodes in order (block distribution), and each
node's tasks serve on ports {port}, {port}+1, ... (open them between the nodes). The
folder must be on a file system every node shares, with Distloop installed on each
node (`DISTLOOP=/path/to/venv/bin/distloop sbatch slurm.sbatch` names another command).

```sh
sbatch slurm.sbatch        # the run folder is runs/<job id>/
scancel <job id>           # every task stops at the same step with a checkpoint
scontrol requeue <job id>  # the job starts again and resumes from that checkpoint
```

Slurm sends SIGTERM 120 s before the time limit (`--signal=TERM@120`), so a job that
runs out of time stops with a checkpoint too.
"""


FORMAT = SlurmFormat()
