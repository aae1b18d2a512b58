"""A task's TF_CONFIG computed from the variables Slurm gives each task of a job step.

TensorFlow's own ``SlurmClusterResolver`` cannot serve here: on a node without GPUs it
runs ``nvidia-smi`` and dies, and with ``gpus_per_task=0`` it divides by zero. The
cluster is computed the way Slurm lays out a step instead: ranks (``SLURM_PROCID``)
fill the step's nodes in order, as many on each as ``SLURM_STEP_TASKS_PER_NODE`` says
(block distribution), and a task's port is a base port plus its rank on its node, so
tasks sharing a node never share a port.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from ..code_text import shown
from ..problems import Problem, ProblemsError, problems_from_validation_error
from ..tf_config import MULTI_MACHINE_STRATEGIES, TaskSpec, TFConfig

DEFAULT_PORT_BASE = 23450
"""The port of each node's first task; the node's next tasks take the ports after it."""
_RANGE = re.compile(r"([0-9]{1,18})(?:-([0-9]{1,18}))?")
_REPEAT = re.compile(r"([0-9]{1,9})(?:\(x([0-9]{1,9})\))?")
SOURCE = "--task-from slurm"
MAX_NODES = 65536
"""More host names than any Slurm cluster has: a longer node list is a mistyped range."""
MAX_TASKS = 65536
"""More tasks than a TensorFlow cluster can start: TF_CONFIG lists every one."""
MAX_TASKS_PER_NODE = 1024
"""As ``distloop export --format slurm`` asks for at most: each takes a port of its node."""


class SlurmError(ValueError):
    """A Slurm variable is missing or says something this layout cannot run."""


def expand_hostlist(text: str) -> list[str]:
    """Slurm's compressed node list (``n[1-3,5],a1,b[02-04]``) as host names, in order.

    What ``scontrol show hostnames`` prints, without needing ``scontrol`` (and the
    Slurm configuration it reads) on the node: zero-padded ranges keep their width,
    and several bracket groups in one name multiply out (``r[1-2]n[1-2]``). The hosts
    are counted before any is written out (the product of each name's ranges, summed
    over the names), so a list that names billions is one line, not all the memory.
    """
    names = [_groups(name, text) for name in _split_top_level(text.strip())]
    total = sum(math.prod(_count(group) for group in groups) for groups in names)
    if total > MAX_NODES:
        raise SlurmError(f"node list {shown(text)} names {total} hosts; at most {MAX_NODES}")
    if not total:
        raise SlurmError("the node list is empty")
    return [
        "".join(parts)
        for groups in names
        for parts in itertools.product(*(_texts(group) for group in groups))
    ]


def _split_top_level(text: str) -> list[str]:
    """Splits at the commas outside brackets (those inside separate ranges)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
        if depth not in (0, 1):
            raise SlurmError(f"node list {shown(text)} has unbalanced brackets")
    if depth:
        raise SlurmError(f"node list {shown(text)} has unbalanced brackets")
    parts.append(text[start:])
    return [part for part in parts if part]


_Group = str | tuple[tuple[int, int, int], ...]
"""A fixed text of a host name, or a bracket group's ranges: (low, high, digits)."""


def _groups(name: str, whole: str) -> list[_Group]:
    """A name as the parts its hosts join, in order; a bracket group stays its ranges, so
    its hosts are counted without being written out."""
    groups: list[_Group] = []
    rest = name
    while "[" in rest:
        opening = rest.index("[")
        closing = rest.index("]", opening)
        groups += [rest[:opening], _ranges(rest[opening + 1 : closing], whole)]
        rest = rest[closing + 1 :]
    if "]" in rest or not name.strip():
        raise SlurmError(f"node list {shown(whole)} has a bad name {shown(name)}")
    return [*groups, rest]


def _ranges(text: str, whole: str) -> tuple[tuple[int, int, int], ...]:
    found = []
    for part in text.split(","):
        match = _RANGE.fullmatch(part.strip())
        if not match:
            raise SlurmError(f"node list {shown(whole)} has a bad range {shown(f'[{text}]')}")
        low_text, high_text = match.group(1), match.group(2) or match.group(1)
        low, high = int(low_text), int(high_text)
        if high < low:
            raise SlurmError(f"node list {shown(whole)} has a bad range {shown(part.strip())}")
        found.append((low, high, len(low_text)))
    return tuple(found)


def _count(group: _Group) -> int:
    return 1 if isinstance(group, str) else sum(high - low + 1 for low, high, _ in group)


def _texts(group: _Group) -> list[str]:
    if isinstance(group, str):
        return [group]
    return [str(n).zfill(width) for low, high, width in group for n in range(low, high + 1)]


def expand_tasks_per_node(text: str) -> list[int]:
    """``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``) as one count per node, in node order;
    the nodes and tasks it names are counted before the list is made."""
    parts: list[tuple[int, int]] = []
    for part in text.strip().split(","):
        match = _REPEAT.fullmatch(part.strip())
        if not match or int(match.group(1)) < 1:
            raise SlurmError(f"tasks per node {shown(text)} is not of Slurm's form (e.g. 2(x3),1)")
        parts.append((int(match.group(1)), int(match.group(2) or 1)))
    nodes = sum(repeat for _, repeat in parts)
    tasks = sum(count * repeat for count, repeat in parts)
    if nodes > MAX_NODES:
        raise SlurmError(f"tasks per node {shown(text)} names {nodes} nodes; at most {MAX_NODES}")
    if max(count for count, _ in parts) > MAX_TASKS_PER_NODE:
        raise SlurmError(
            f"tasks per node {shown(text)} puts more than {MAX_TASKS_PER_NODE} tasks on a node"
        )
    if tasks > MAX_TASKS:
        raise SlurmError(f"tasks per node {shown(text)} names {tasks} tasks; at most {MAX_TASKS}")
    return [count for count, repeat in parts for _ in range(repeat)]


@dataclass(frozen=True)
class SlurmStep:
    """The layout of a job step, and which of its tasks this process is."""

    rank: int
    nodes: list[str]
    tasks_per_node: list[int]

    @classmethod
    def from_environment(cls, environ: Mapping[str, str]) -> SlurmStep:
        """Reads the step from the variables ``srun`` sets in each task's environment."""

        def variable(*names: str) -> str:
            for name in names:
                if environ.get(name, "").strip():
                    return environ[name]
            raise SlurmError(
                f"{names[0]} is not set: start each task with srun inside a Slurm job "
                "(distloop export --format slurm writes such a script)"
            )

        rank_text = variable("SLURM_PROCID")
        if not re.fullmatch(r"[0-9]{1,9}", rank_text.strip()):
            raise SlurmError(f"SLURM_PROCID is {shown(rank_text)}, not a task number")
        step = cls(
            rank=int(rank_text),
            nodes=expand_hostlist(variable("SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST")),
            tasks_per_node=expand_tasks_per_node(
                variable("SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE")
            ),
        )
        if len(step.nodes) != len(step.tasks_per_node):
            raise SlurmError(
                f"Slurm lists {len(step.nodes)} node(s) but task counts for "
                f"{len(step.tasks_per_node)}"
            )
        if step.rank >= step.size:
            raise SlurmError(f"SLURM_PROCID {step.rank} is not below the step's {step.size} tasks")
        step.check_placement(environ)
        return step

    @property
    def size(self) -> int:
        return sum(self.tasks_per_node)

    def placement(self, rank: int) -> tuple[int, int]:
        """The node (by its place in the node list) and the rank on that node of a task."""
        first = 0
        for node, count in enumerate(self.tasks_per_node):
            if rank < first + count:
                return node, rank - first
            first += count
        raise SlurmError(f"task {rank} is beyond the step's {self.size} tasks")

    def check_placement(self, environ: Mapping[str, str]) -> None:
        """Fails where Slurm placed this task elsewhere than block distribution would.

        Under a cyclic or arbitrary distribution the computed addresses would name the
        wrong nodes and the cluster would hang waiting for tasks that are not there.
        """
        node, local = self.placement(self.rank)
        given = (environ.get("SLURM_NODEID", ""), environ.get("SLURM_LOCALID", ""))
        if all(re.fullmatch(r"[0-9]{1,9}", value.strip()) for value in given) and (
            int(given[0]),
            int(given[1]),
        ) != (
            node,
            local,
        ):
            raise SlurmError(
                f"Slurm placed task {self.rank} as task {given[1]} of node {given[0]}, not "
                f"{local} of node {node}: run the step with --distribution=block"
            )

    def addresses(self, port_base: int) -> list[str]:
        """Every task's ``host:port``, by rank: node by node, in one pass over the tasks
        (a step of 65,536 nodes is laid out as fast as it is listed)."""
        return [
            f"{host}:{port_base + local}"
            for host, count in zip(self.nodes, self.tasks_per_node, strict=True)
            for local in range(count)
        ]


def slurm_tf_config(
    step: SlurmStep, strategy_kind: str, *, port_base: int = DEFAULT_PORT_BASE, ps_tasks: int = 1
) -> TFConfig:
    """The TF_CONFIG of this step's task ``step.rank``.

    multi_worker_mirrored: every rank is a worker, rank 0 the one that reports.
    parameter_server: rank 0 is the chief (the coordinator), the next ``ps_tasks``
    ranks serve variables, the rest are workers.
    """
    top = port_base + max(step.tasks_per_node) - 1
    if port_base < 1 or top > 65535:
        raise SlurmError(f"ports {port_base}-{top} are outside 1-65535: choose another --port-base")
    addresses = step.addresses(port_base)
    if strategy_kind == "multi_worker_mirrored":
        cluster = {"worker": addresses}
        task = TaskSpec(type="worker", index=step.rank)
    elif strategy_kind == "parameter_server":
        if step.size < ps_tasks + 2:
            raise SlurmError(
                f"a parameter_server step needs a chief, {ps_tasks} ps and at least one "
                f"worker: {ps_tasks + 2} tasks, not {step.size}"
            )
        cluster = {
            "chief": addresses[:1],
            "worker": addresses[1 + ps_tasks :],
            "ps": addresses[1 : 1 + ps_tasks],
        }
        task = _ps_task(step.rank, ps_tasks)
    else:
        raise SlurmError(_only_clusters(strategy_kind))
    try:
        return TFConfig(cluster=cluster, task=task)
    except ValidationError as exc:  # e.g. a host name Slurm allows and TensorFlow does not
        raise ProblemsError(
            _once_each(problems_from_validation_error(exc, ("tf_config",))), SOURCE
        ) from None


def _once_each(problems: list[Problem]) -> list[Problem]:
    """One problem per bad value: a node's name is every one of its tasks' host, and 20
    tasks on a node with a bad name said the same thing 20 times."""
    first: dict[str, Problem] = {}
    counts: dict[str, int] = {}
    for problem in problems:
        first.setdefault(problem.message, problem)
        counts[problem.message] = counts.get(problem.message, 0) + 1
    return [
        Problem(
            problem.loc,
            problem.message + (f" ({counts[message]} tasks)" if counts[message] > 1 else ""),
        )
        for message, problem in first.items()
    ]


def _only_clusters(strategy_kind: str) -> str:
    return f"a Slurm job runs {' or '.join(MULTI_MACHINE_STRATEGIES)}, not {strategy_kind}"


def _ps_task(rank: int, ps_tasks: int) -> TaskSpec:
    if rank == 0:
        return TaskSpec(type="chief", index=0)
    if rank <= ps_tasks:
        return TaskSpec(type="ps", index=rank - 1)
    return TaskSpec(type="worker", index=rank - 1 - ps_tasks)


def tf_config_from_slurm(
    environ: Mapping[str, str], strategy_kind: str, *, port_base: int = DEFAULT_PORT_BASE
) -> TFConfig:
    """This task's TF_CONFIG in the step ``srun`` started; a ProblemsError says why not."""
    try:
        return slurm_tf_config(
            SlurmStep.from_environment(environ), strategy_kind, port_base=port_base
        )
    except SlurmError as exc:
        raise ProblemsError([Problem(("tf_config",), str(exc))], SOURCE) from None
