"""A Slurm task's TF_CONFIG: node lists expanded as Slurm's own scontrol expands them,
ranks laid out node by node, and every variable that is missing or wrong named."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster.slurm import (
    SlurmError,
    SlurmStep,
    expand_hostlist,
    expand_tasks_per_node,
    slurm_tf_config,
    tf_config_from_slurm,
)
from distloop.engine.config import load_project, load_project_data
from distloop.engine.problems import ProblemsError
from distloop.engine.run_folder import read_status
from distloop_testing import REPO, run_engine
from slurm_daemons import single_node_slurm, unavailable_reason
from test_cluster import multi_worker, step_lines

NODE_LISTS = [
    "n1",
    "n[1-3,5]",
    "a1,b[02-04]",
    "n[1-3,5],a1,b[02-04]",
    "r[1-2]n[1-2]",
    "gpu-[001-003]",
    "x[8-11],y",
]


@pytest.fixture(scope="module")
def scontrol(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Slurm's own expander; it reads a configuration, not a daemon, to expand names."""
    binary = shutil.which("scontrol")
    if binary is None:
        pytest.skip("scontrol (Debian's slurm-client) is not installed")
    conf = tmp_path_factory.mktemp("slurm") / "slurm.conf"
    conf.write_text(
        "ClusterName=t\nSlurmctldHost=localhost\nNodeName=localhost CPUs=1\n"
        "PartitionName=p Nodes=localhost Default=YES\n"
    )
    return binary, str(conf)


@pytest.mark.parametrize("node_list", NODE_LISTS)
def test_node_lists_expand_as_slurms_scontrol_expands_them(
    node_list: str, scontrol: tuple[str, str]
) -> None:
    binary, conf = scontrol
    printed = subprocess.run(
        [binary, "show", "hostnames", node_list],
        env={"SLURM_CONF": conf, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout.split()
    assert expand_hostlist(node_list) == printed


def test_zero_padding_and_several_groups_without_scontrol() -> None:
    assert expand_hostlist("b[08-10]") == ["b08", "b09", "b10"]
    assert expand_hostlist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]


@pytest.mark.parametrize("bad", ["", "n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "n[1-3]]", ","])
def test_a_malformed_node_list_is_named(bad: str) -> None:
    with pytest.raises(SlurmError, match="node list"):
        expand_hostlist(bad)


def test_tasks_per_node_repeat_counts() -> None:
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]
    for bad in ("", "0", "2(x)", "two"):
        with pytest.raises(SlurmError, match="tasks per node"):
            expand_tasks_per_node(bad)


def _env(rank: int, nodes: str = "n[1-2]", per_node: str = "2(x2)", **more: str) -> dict:
    return {
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NODELIST": nodes,
        "SLURM_STEP_TASKS_PER_NODE": per_node,
        **more,
    }


def test_multi_worker_ranks_fill_each_node_with_ports_from_the_base() -> None:
    config = tf_config_from_slurm(_env(3), "multi_worker_mirrored", port_base=30000)
    assert config.cluster == {
        "worker": ["n1:30000", "n1:30001", "n2:30000", "n2:30001"],
    }
    assert str(config.task) == "worker:3"


def test_parameter_server_ranks_are_chief_then_ps_then_workers() -> None:
    configs = [
        tf_config_from_slurm(_env(rank, "a,b", "2,2"), "parameter_server") for rank in range(4)
    ]
    assert configs[0].cluster == {
        "chief": ["a:23450"],
        "ps": ["a:23451"],
        "worker": ["b:23450", "b:23451"],
    }
    assert [str(c.task) for c in configs] == ["chief:0", "ps:0", "worker:0", "worker:1"]


def test_uneven_nodes_place_each_rank_on_its_own_node() -> None:
    step = SlurmStep.from_environment(_env(0, "n[1-3]", "3,1,2"))
    assert [step.placement(r) for r in range(6)] == [
        (0, 0), (0, 1), (0, 2), (1, 0), (2, 0), (2, 1),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("environ", "says"),
    [
        ({}, "SLURM_PROCID is not set: start each task with srun"),
        (_env(0, per_node=""), "SLURM_STEP_TASKS_PER_NODE is not set"),
        (_env(4), "SLURM_PROCID 4 is not below the step's 4 tasks"),
        (_env(0, per_node="2"), "lists 2 node(s) but task counts for 1"),
        (_env(1, SLURM_NODEID="1", SLURM_LOCALID="0"), "--distribution=block"),
        (_env(0, nodes="bad_host", per_node="2"), "not a valid host name"),
    ],
)
def test_what_stops_a_slurm_task_is_one_problem(environ: dict, says: str) -> None:
    with pytest.raises(ProblemsError) as caught:
        tf_config_from_slurm(environ, "multi_worker_mirrored")
    assert says in str(caught.value)


def test_strategies_and_ports_a_step_cannot_have() -> None:
    step = SlurmStep.from_environment(_env(0, "n1", "2"))
    with pytest.raises(SlurmError, match="not mirrored"):
        slurm_tf_config(step, "mirrored")
    with pytest.raises(SlurmError, match="needs a chief, 1 ps and at least one worker"):
        slurm_tf_config(step, "parameter_server")
    with pytest.raises(SlurmError, match="outside 1-65535"):
        slurm_tf_config(step, "multi_worker_mirrored", port_base=65535)


# --- a real Slurm: munged, slurmctld and slurmd started by the test ------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    with single_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
        yield env


def _consecutive_free_ports(count: int) -> int:
    """A base port whose next ``count`` ports are free now (tasks bind them moments later)."""
    for _ in range(50):
        with socket.create_server(("127.0.0.1", 0)) as probe:
            base = probe.getsockname()[1]
        if base + count > 65535:
            continue
        try:
            held = [socket.create_server(("", base + i)) for i in range(count)]
        except OSError:
            continue
        for server in held:
            server.close()
        return base
    raise RuntimeError("no run of free ports found")


@pytest.mark.slow
def test_srun_tasks_train_the_one_process_trace(slurm: dict[str, str], tmp_path: Path) -> None:
    """Two tasks srun starts, each computing its TF_CONFIG from Slurm's variables: the
    MultiWorkerMirrored cluster gives the losses of one process, and each task its folder."""
    data = multi_worker()
    data["name"] = "slurm test"
    path = tmp_path / "project.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "run"
    command = [
        "srun",
        "--ntasks=2",
        "--distribution=block",
        "--kill-on-bad-exit=1",
        f"--output={tmp_path}/task-%t.out",
        f"--error={tmp_path}/task-%t.err",
        sys.executable,
        "-m",
        "distloop.engine",
        str(path),
        "--task-from",
        "slurm",
        "--out",
        str(out),
        "--port-base",
        str(_consecutive_free_ports(2)),
    ]
    done = subprocess.run(command, cwd=REPO, env=slurm, capture_output=True, text=True, timeout=300)
    errors = "".join((tmp_path / f"task-{rank}.err").read_text() for rank in range(2))
    assert done.returncode == 0, done.stderr[-1000:] + errors[-3000:]

    single_data = multi_worker()
    single_data["strategy"] = {"kind": "one_device"}
    single = run_engine(load_project_data(single_data), None)
    for rank in range(2):
        steps, losses = step_lines((tmp_path / f"task-{rank}.out").read_text())
        assert steps == single["steps"] == list(range(1, 21))
        np.testing.assert_allclose(losses, single["losses"], rtol=1e-5)
    for task in ("worker-0", "worker-1"):
        status = read_status(out / "tasks" / task)
        assert status["status"] == "finished"
        assert status["num_replicas"] == 2
    ran = load_project(out / "tasks" / "worker-1" / "project.json")
    assert str(ran.tf_config.task) == "worker:1"
    assert ran.tf_config.cluster["worker"][0].startswith("localhost:")
