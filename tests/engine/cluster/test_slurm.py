"""A Slurm task's TF_CONFIG: node lists expanded as Slurm's own scontrol expands them,
ranks laid out node by node, and every variable that is missing or wrong named."""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster.slurm_jobs import follow_job, job_of, job_state, submit_job
from distloop.engine.cluster_layout.slurm import (
    SlurmError,
    SlurmStep,
    expand_hostlist,
    expand_tasks_per_node,
    slurm_tf_config,
    tf_config_from_slurm,
)
from distloop.engine.exports.slurm import SlurmJob
from distloop.engine.message_stream import MAX_LINE
from distloop.engine.messages import EnvironmentReady, Log, Resources, RunFinished, StepMetrics
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.run_model import RunModel
from support.clusters import multi_worker, step_lines
from support.distloop_testing import REPO, distloop, run_engine
from support.slurm_daemons import consecutive_free_ports, single_node_slurm

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
        ({**_env(0), "SLURM_PROCID": "\u00b2"}, "SLURM_PROCID is '\u00b2', not a task number"),
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


HOSTILE_STEPS = [
    pytest.param(
        {"SLURM_STEP_NODELIST": "r[0-60000]n[0-60000]"},
        "node list 'r[0-60000]n[0-60000]' names 3600120001 hosts; at most 65536",
        id="ranges-multiplied",
    ),
    pytest.param(
        {"SLURM_STEP_NODELIST": ",".join(f"r{i}[0-60000]" for i in range(300))},
        "(4089 characters) names 18000300 hosts; at most 65536",
        id="300-parts",
    ),
    pytest.param(
        {"SLURM_STEP_NODELIST": "n[1" + "0" * 5000 + "]"},
        "(5004 characters) has a bad range",
        id="5000-digit-number",
    ),
    pytest.param(
        {"SLURM_STEP_NODELIST": "n[1-65536]", "SLURM_STEP_TASKS_PER_NODE": "40000(x65536)"},
        "tasks per node '40000(x65536)' puts more than 1024 tasks on a node",
        id="40000-tasks-each",
    ),
    pytest.param(
        {"SLURM_STEP_NODELIST": "n[1-65536]", "SLURM_STEP_TASKS_PER_NODE": "2(x65536)"},
        "tasks per node '2(x65536)' names 131072 tasks; at most 65536",
        id="131072-tasks",
    ),
    pytest.param(
        {"SLURM_STEP_TASKS_PER_NODE": "1" + "0" * 5000},
        "(5001 characters) is not of Slurm's form",
        id="5000-digit-count",
    ),
    pytest.param(
        {"SLURM_PROCID": "1" + "0" * 5000},
        "SLURM_PROCID is '1000",
        id="5000-digit-rank",
    ),
]


@pytest.mark.parametrize(("hostile", "says"), HOSTILE_STEPS)
def test_a_hostile_slurm_environment_is_refused_in_one_line(
    hostile: dict[str, str], says: str, tmp_path: Path
) -> None:
    """Counted before expanded: a node list naming billions of hosts, or a number past
    Python's int conversion limit, is one problem, not all the memory or a traceback."""
    project = tmp_path / "project.json"
    project.write_text(json.dumps(multi_worker()))
    environ = {**os.environ, **_env(0, "n1", "1"), **hostile}
    done = distloop(
        "run", str(project), "--task-from", "slurm", "--out", str(tmp_path / "run"),
        env=environ, timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert says in done.stderr
    assert len(done.stderr) < 1000  # the hostile value is quoted shortened
    assert not (tmp_path / "run").exists()


def test_a_step_of_65536_nodes_places_its_last_task_in_one_pass() -> None:
    """Placement was a scan of the nodes for each rank (hours at this size)."""
    config = tf_config_from_slurm(
        _env(65535, "n[00001-65536]", "1(x65536)"), "multi_worker_mirrored"
    )
    assert str(config.task) == "worker:65535"
    assert config.cluster["worker"][0] == "n00001:23450"
    assert config.cluster["worker"][-1] == "n65536:23450"


# --- a real Slurm: munged, slurmctld and slurmd started by the test ------------------------


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with single_node_slurm(tmp_path_factory.mktemp("slurm")) as env:
        yield env


@pytest.mark.slurm
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
        str(consecutive_free_ports(2)),
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


def _squeue_state(slurm: dict[str, str], job: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", job, "-o", "%T"], env=slurm, capture_output=True, text=True
    ).stdout.strip()


def _wait_for(condition, what: str, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@contextlib.contextmanager
def _held_in_ptrace_stop(pid: int) -> Iterator[None]:
    """Every thread of ``pid`` stopped under ptrace until the block ends: a signal sent
    meanwhile (SIGCONT, SIGUSR1) reaches only this tracer, which does not pass it on, as a
    process stuck in the kernel would not answer it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    attach, detach, all_children = 16, 17, 0x40000000  # PTRACE_ATTACH/DETACH, __WALL
    held: list[int] = []
    try:
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            if libc.ptrace(attach, tid, None, None) != 0:
                continue  # a thread that ended meanwhile
            os.waitpid(tid, all_children)
            held.append(tid)
        assert held, f"could not attach to {pid}: errno {ctypes.get_errno()}"
        yield
    finally:
        for tid in held:
            libc.ptrace(detach, tid, None, None)


def _wait_until_unchanged(read, still_s: float = 3.0, timeout_s: float = 60) -> None:
    """Until ``read()`` gave the same answer for ``still_s``."""
    deadline = time.monotonic() + timeout_s
    last, since = read(), time.monotonic()
    while time.monotonic() - since < still_s:
        assert time.monotonic() < deadline, "still changing"
        time.sleep(0.2)
        now = read()
        if now != last:
            last, since = now, time.monotonic()


def _size(path: Path) -> int:
    with contextlib.suppress(OSError):
        return path.stat().st_size
    return 0


def _metric_rows(run_dir: Path) -> int:
    with contextlib.suppress(OSError):
        return max(0, len((run_dir / "metrics.csv").read_text().splitlines()) - 1)
    return 0


def test_the_sbatch_script_takes_the_project_s_cluster_size_and_refuses_bad_values(
    tmp_path: Path,
) -> None:
    data = multi_worker()
    data["tf_config"] = {
        "cluster": {"worker": ["a:1", "b:1", "c:1"]},
        "task": {"type": "worker", "index": 0},
    }
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    done = distloop("export", str(project), "--format", "slurm", "--out", str(tmp_path / "a"))
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "a" / "slurm.sbatch").read_text()
    assert "#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=1\n" in script
    assert "#SBATCH --signal=TERM@120\n#SBATCH --requeue\n" in script
    assert subprocess.run(["bash", "-n", str(tmp_path / "a" / "slurm.sbatch")]).returncode == 0

    refused = distloop(
        "export", str(project), "--format", "slurm", "--out", str(tmp_path / "b"),
        "--time", "1:00\n#SBATCH --uid=0", "--partition", "a;rm -rf ~", "--nodes", "0",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "time: '1:00\\n#SBATCH --uid=0' is not a Slurm time" in refused.stderr
    assert "partition: 'a;rm -rf ~' is not a partition name" in refused.stderr
    assert "nodes: 0 nodes: give 1 to 10000" in refused.stderr
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("command", ["export", "submit"])
def test_zero_tasks_per_node_and_an_endless_time_are_one_line_each(
    command: str, tmp_path: Path
) -> None:
    """``--ntasks-per-node 0`` divided the project's tasks by zero (a traceback), and a
    time limit past Slurm's 32-bit minutes was written into slurm.sbatch."""
    data = multi_worker()
    data["tf_config"] = {
        "cluster": {"worker": ["a:1", "b:1"]},
        "task": {"type": "worker", "index": 0},
    }
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    out = tmp_path / "job"
    shape = ["--ntasks-per-node", "0", "--time", "99999999999999999999"]
    where = ["--format", "slurm"] if command == "export" else []
    done = distloop(command, str(project), *where, "--out", str(out), *shape)
    assert done.returncode == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert "ntasks_per_node: give 1 to 1024 tasks per node" in done.stderr
    assert "time: '99999999999999999999' is longer than Slurm's longest limit" in done.stderr
    assert not out.exists()
    assert SlurmJob(nodes=2, time="2982616-4:13:00").problems("multi_worker_mirrored") == []
    assert SlurmJob(nodes=2, time="4294967294").problems("multi_worker_mirrored") != []


def test_slurm_ids_in_other_digits_are_not_numbers() -> None:
    """'²'.isdigit() is true and int('²') raises: such an id is no id to compare."""
    config = tf_config_from_slurm(
        _env(1, SLURM_NODEID="\u00b2", SLURM_LOCALID="0"), "multi_worker_mirrored"
    )
    assert str(config.task) == "worker:1"


# --- distloop submit: sbatch, and the job followed from the chief's messages ---------------


def _submitted_project(tmp_path: Path, steps: int, name: str) -> Path:
    data = multi_worker(steps=steps)
    data["name"] = name
    data["training"]["checkpoint_every"] = 50
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    return project


def _submit_env(slurm: dict[str, str]) -> dict[str, str]:
    return {**slurm, "DISTLOOP": f"{sys.executable} -m distloop.gui.launcher"}


def _submit_argv(project: Path, job_dir: Path, *more: str) -> list[str]:
    return [
        sys.executable, "-m", "distloop.gui.launcher", "submit", str(project),
        "--out", str(job_dir), "--nodes", "1", "--ntasks-per-node", "2",
        "--port-base", str(consecutive_free_ports(2)), *more,
    ]  # fmt: skip


def _job_and_run(stdout: str) -> tuple[str, Path]:
    found = re.search(r"submitted job (\d+), run folder (\S+)", stdout)
    assert found, stdout
    return found[1], Path(found[2])


STEPS = 500
"""Every followed job's length: the one-process trace is trained once for them all."""


@functools.cache
def _single_process_trace(steps: int = STEPS) -> dict:
    data = multi_worker(steps=steps)
    data["strategy"] = {"kind": "one_device"}
    return run_engine(load_project_data(data), None, timeout_s=400)


@pytest.mark.slurm
@pytest.mark.slow
def test_submit_wait_follows_the_job_to_the_one_process_trace(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """sbatch, then the chief's messages from the shared folder through the CLI's printer:
    its steps are the one-process trace, the job's states are shown, and the end is the
    run's."""
    project = _submitted_project(tmp_path, STEPS, "submit wait")
    done = subprocess.run(
        _submit_argv(project, tmp_path / "job", "--wait"),
        cwd=REPO, env=_submit_env(slurm), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    job, run_dir = _job_and_run(done.stdout)
    assert run_dir == tmp_path / "job" / "runs" / job
    steps, losses = step_lines(done.stdout)
    single = _single_process_trace()
    assert steps == single["steps"] == list(range(1, STEPS + 1))
    np.testing.assert_allclose(losses, single["losses"], rtol=1e-5)
    assert f"distloop: job {job}: RUNNING" in done.stderr
    assert f"distloop: job {job}: COMPLETED" in done.stderr
    assert f"distloop: finished after step {STEPS}" in done.stderr
    assert read_status(run_dir / "tasks" / "worker-1")["status"] == "finished"
    # What a runs list asks: which job ran the folder, and how it stands.
    assert job_of(run_dir) == job and job_of(tmp_path) is None
    assert job_state(job, slurm).state == "COMPLETED"


def _follow_in_background(
    slurm: dict[str, str], project: Path, job_dir: Path
) -> tuple[subprocess.Popen[str], str, Path]:
    """``distloop submit --wait`` running, with the job id and run folder it printed first."""
    follower = subprocess.Popen(
        _submit_argv(project, job_dir, "--wait"),
        cwd=REPO, env=_submit_env(slurm), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    assert follower.stdout is not None
    job, run_dir = _job_and_run(follower.stdout.readline())
    return follower, job, run_dir


@pytest.mark.slurm
@pytest.mark.slow
def test_ctrl_c_stops_a_followed_job_with_a_checkpoint_and_its_resume_ends_the_trace(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """Ctrl-C while following is Stop: scancel, every task stops at one step with a
    checkpoint, the run reads ``stopped``; ``submit --resume`` continues it in a new job to
    the uninterrupted trace."""
    steps = STEPS
    project = _submitted_project(tmp_path, steps, "submit stop")
    follower, job, run_dir = _follow_in_background(slurm, project, tmp_path / "job")
    chief = run_dir / "tasks" / "worker-0"
    try:
        _wait_for(lambda: _metric_rows(chief) >= 60, "the first 60 steps")
        follower.send_signal(signal.SIGINT)
        out, err = follower.communicate(timeout=120)
    finally:
        follower.kill()
        subprocess.run(["scancel", job], env=slurm, timeout=30)
    assert follower.returncode == 130, err[-3000:]
    assert f"Ctrl-C: cancelling job {job} (scancel)" in err
    assert re.search(r"distloop: stopped after step \d+", err), err[-3000:]
    stopped = read_status(chief)
    assert step_lines(out)[0] == list(range(1, stopped["last_step"] + 1))
    assert stopped["status"] == "stopped", err[-3000:]
    assert 60 <= stopped["last_step"] < steps
    assert (chief / "checkpoints" / "checkpoint").is_file()

    resumed = distloop(
        "submit", "--resume", str(run_dir), "--wait", env=_submit_env(slurm), timeout_s=400
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert f"distloop: finished after step {steps}" in resumed.stderr
    _assert_the_uninterrupted_trace(chief)
    # The follower of the new job shows its steps only, not the stopped job's again.
    assert step_lines(resumed.stdout)[0] == list(range(stopped["last_step"] + 1, steps + 1))


def _assert_the_uninterrupted_trace(chief: Path) -> None:
    """Each step once (those after the checkpoint were trained again, not appended twice),
    with the losses of one process."""
    metrics = read_metrics(chief)
    assert metrics["step"] == [float(s) for s in range(1, STEPS + 1)]
    np.testing.assert_allclose(
        np.float32(metrics["loss"]), _single_process_trace()["losses"], rtol=1e-5
    )


@pytest.mark.slurm
@pytest.mark.slow
def test_a_requeued_job_resumes_by_itself_and_its_follower_reports_the_finished_run(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """``scontrol requeue`` (Slurm's preemption) mid-run: every task stops at one step with
    a checkpoint (SIGTERM), the job starts again and resumes to the uninterrupted trace,
    and the follower, seeing the attempt's ``stopped`` while the job waits, goes on to
    report the finished run."""
    project = _submitted_project(tmp_path, STEPS, "submit requeue")
    follower, job, run_dir = _follow_in_background(slurm, project, tmp_path / "job")
    chief = run_dir / "tasks" / "worker-0"
    try:
        _wait_for(lambda: _metric_rows(chief) >= 60, "the first 60 steps")
        subprocess.run(["scontrol", "requeue", job], env=slurm, check=True, timeout=30)
        _wait_for(lambda: _squeue_state(slurm, job) == "PENDING", "the requeue")
        first = read_status(chief)
        # Slurm holds a requeued job back two minutes; the test lets it start at once.
        subprocess.run(
            ["scontrol", "update", f"jobid={job}", "starttime=now"],
            env=slurm, check=True, timeout=30,
        )  # fmt: skip
        out, err = follower.communicate(timeout=400)
    finally:
        follower.kill()
        subprocess.run(["scancel", job], env=slurm, timeout=30)
    assert follower.returncode == 0, err[-3000:]
    assert first["status"] == "stopped", err[-3000:]
    assert 60 <= first["last_step"] < STEPS
    assert f"job {job} was requeued: its tasks resume from the last checkpoint" in err
    assert f"distloop: finished after step {STEPS}" in err
    for task in ("worker-0", "worker-1"):
        assert read_status(chief.parent / task)["status"] == "finished"
    _assert_the_uninterrupted_trace(chief)
    steps = step_lines(out)[0]
    assert steps[-1] == STEPS and first["last_step"] in steps


@pytest.mark.slurm
@pytest.mark.slow
def test_a_running_job_dumps_every_task_s_stacks_and_its_follower_names_a_stalled_task(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """``distloop cluster --dump`` on a submitted job: scancel --signal=USR1 reaches each
    task's distloop, which passes it to its engine, and the job trains on. Then worker 1
    stops (held under ptrace): the follower, through the engine API the window uses, has every task
    dump once no step came for a while, and names worker 1."""
    project = _submitted_project(tmp_path, 100_000, "submit dump")
    job_shape = SlurmJob(nodes=1, tasks_per_node=2, port_base=consecutive_free_ports(2))
    run = submit_job(load_project(project), tmp_path / "job", job_shape, env=_submit_env(slurm))
    run.quiet_dump_s = 3600.0  # no dump of its own while the test asks for one
    run.start()
    tasks = run.run_dir / "tasks"
    said: list[str] = []

    def poll_until(condition, what: str) -> None:
        def polled() -> bool:
            said.extend(m.text for m in run.poll(0.5) if isinstance(m, Log))
            return condition()

        _wait_for(polled, what)

    try:
        poll_until(lambda: _metric_rows(tasks / "worker-0") >= 5, "the first steps")
        dumped = distloop("cluster", "--dump", str(run.run_dir), env=slurm, timeout_s=60)
        assert dumped.returncode == 0, dumped.stderr
        for task in ("worker-0", "worker-1"):
            stacks = (tasks / task / "stacks.txt").read_text()
            assert "Current thread" in stacks or "Thread 0x" in stacks, task
        assert _squeue_state(slurm, run.job_id) == "RUNNING"  # a dump stops nothing

        # Slurm hands one request to a task more than once (to its distloop run, which
        # passes it on, and to the engine itself), the copies up to seconds apart: wait
        # until every copy is written, so the next dump counts only answers to itself.
        _wait_until_unchanged(
            lambda: [_size(tasks / t / "stacks.txt") for t in ("worker-0", "worker-1")]
        )
        # Stepping again, followed: then worker 1 stalls.
        rows = _metric_rows(tasks / "worker-0")
        poll_until(lambda: _metric_rows(tasks / "worker-0") > rows + 20, "more steps")
        # Stopped for good: SIGSTOP would not do, Slurm sends SIGCONT with every signal.
        with _held_in_ptrace_stop(read_status(tasks / "worker-1")["pid"]):
            # Soon: a task that sends no heartbeats fails the cluster within seconds.
            run.quiet_dump_s = 2.0
            poll_until(lambda: any(text.startswith("no step for") for text in said), "the dump")
    finally:
        subprocess.run(["scancel", run.job_id], env=slurm, timeout=30)
        run.close()
    warning = next(text for text in said if text.startswith("no step for"))
    assert "worker:1 did not answer" in warning, warning
    assert "worker:0" not in warning, warning


@pytest.mark.slurm
@pytest.mark.slow
def test_a_worker_held_up_again_and_again_is_named_the_straggler_of_its_job(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """Every task records its own resource samples in its folder; the follower reads them
    all, so the run's model (the window's and ``submit --wait``'s) names a worker that is
    held up from outside, as it does in a local cluster, and a stall's line names it too."""
    project = _submitted_project(tmp_path, 1_000_000, "submit straggler")
    job_shape = SlurmJob(nodes=1, tasks_per_node=2, port_base=consecutive_free_ports(2))
    run = submit_job(load_project(project), tmp_path / "job", job_shape, env=_submit_env(slurm))
    run.quiet_dump_s = 3600.0
    run.start()
    model = RunModel(run_dir=run.run_dir)
    tasks = run.run_dir / "tasks"
    said: list[str] = []
    pid: int | None = None

    def named() -> bool:
        return any(f.kind == "straggler" for f in model.findings)

    deadline = time.monotonic() + 200
    try:
        while not named():
            assert time.monotonic() < deadline and not run.done, (said[-5:], pid)
            for message in run.poll(0.2):
                model.apply(message)
                if isinstance(message, Log):
                    said.append(message.text)
            if pid is None and _metric_rows(tasks / "worker-0") >= 5:
                pid = read_status(tasks / "worker-1")["pid"]
            if pid is not None:
                os.kill(pid, signal.SIGSTOP)  # held up, as a CPU quota or a busy node would
                time.sleep(0.2)
                os.kill(pid, signal.SIGCONT)
        assert {"worker:0", "worker:1"} <= set(model.resources)  # every task's samples
        (straggler,) = [f for f in model.findings if f.kind == "straggler"]
        assert straggler.line.startswith("worker:1 is the straggler: its steps take "), straggler
        assert "held up (stopped, throttled or short of CPU)" in straggler.line
        # Then worker 1 stops for good: the stall's line names the straggler seen before it.
        with _held_in_ptrace_stop(pid):
            run.quiet_dump_s = 2.0
            _wait_for(
                lambda: (
                    said.extend(m.text for m in run.poll(0.5) if isinstance(m, Log))
                    or any(text.startswith("no step for") for text in said)
                ),
                "the stall's line",
            )
    finally:
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        subprocess.run(["scancel", run.job_id], env=slurm, timeout=30)
        run.close()
    stall = next(text for text in said if text.startswith("no step for"))
    assert "; before it, worker:1 is the straggler" in stall, stall


@pytest.mark.slurm
@pytest.mark.slow
def test_a_second_ctrl_c_stops_following_a_job_that_is_being_cancelled(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """``distloop submit --follow`` on a running job, then two Ctrl-Cs: the first cancels
    the job, the second stops following without waiting for its end, saying how to go on."""
    project = _submitted_project(tmp_path, 100_000, "submit follow")
    job_shape = SlurmJob(nodes=1, tasks_per_node=2, port_base=consecutive_free_ports(2))
    run = submit_job(load_project(project), tmp_path / "job", job_shape, env=_submit_env(slurm))
    try:
        _wait_for(lambda: _metric_rows(run.run_dir / "tasks" / "worker-0") >= 5, "first steps")
        left = _follow_then_ctrl_c_twice(slurm, run.run_dir, run.job_id, tmp_path)
    finally:
        subprocess.run(["scancel", run.job_id], env=slurm, timeout=30)
        run.close()
    assert left.returncode == 130, left.stderr
    assert left.stderr.splitlines()[-1] == (
        f"distloop: no longer following job {run.job_id}, which Slurm goes on with: follow "
        f"it with distloop submit --follow {run.run_dir}, cancel it with scancel {run.job_id}"
    )


def _follow_then_ctrl_c_twice(
    slurm: dict[str, str], run_dir: Path, job: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """``distloop submit --follow`` on the running job, then two Ctrl-Cs: the first
    cancels the job, the second stops following without waiting for its end."""
    with (tmp_path / "follow.out").open("w") as out:
        follower = subprocess.Popen(
            [sys.executable, "-m", "distloop.gui.launcher", "submit", "--follow", str(run_dir)],
            cwd=REPO, env=slurm, stdout=out, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert follower.stderr is not None
        said: list[str] = []

        def read_until(start: str) -> None:
            while not said or not said[-1].startswith(start):
                said.append(follower.stderr.readline())
                assert said[-1], "".join(said)

        read_until(f"distloop: job {job}: RUNNING")
        follower.send_signal(signal.SIGINT)
        read_until("distloop: Ctrl-C: cancelling job")  # two signals at once would be one
        follower.send_signal(signal.SIGINT)
        rest = follower.communicate(timeout=60)[1]
    return subprocess.CompletedProcess(follower.args, follower.returncode, "", "".join(said) + rest)


def test_submit_without_sbatch_is_one_line(tmp_path: Path) -> None:
    project = _submitted_project(tmp_path, 20, "no slurm here")
    done = distloop(
        "submit", str(project), "--out", str(tmp_path / "job"), env={"PATH": str(tmp_path)}
    )
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "distloop: sbatch is not on PATH: submit from a machine with Slurm's client commands "
        "(or write the script with distloop export --format slurm)"
    ]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_job_sbatch_refuses_is_one_line(slurm: dict[str, str], tmp_path: Path) -> None:
    project = _submitted_project(tmp_path, 20, "bad partition")
    done = distloop(
        "submit", str(project), "--out", str(tmp_path / "job"), "--partition", "nosuch",
        env=slurm,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        "distloop: sbatch refused the job: Invalid partition name specified"
    ]


def test_a_finished_submitted_run_is_not_submitted_again(tmp_path: Path) -> None:
    """Resuming a finished run would only start a job that fails: refused in one line,
    before Slurm is asked anything (there is no sbatch on this PATH)."""
    job_dir = tmp_path / "job"
    project = _submitted_project(tmp_path, 20, "finished")
    job_dir.mkdir()
    (job_dir / "project.json").write_text(project.read_text())
    run_dir = job_dir / "runs" / "7"
    chief = run_dir / "tasks" / "worker-0"
    chief.mkdir(parents=True)
    (chief / "status.json").write_text(json.dumps({"status": "finished", "last_step": 20}))
    (run_dir / "status.json").write_text(
        json.dumps({"slurm": {"job": "7", "folder": str(job_dir), "messages_from": 0}})
    )
    done = distloop("submit", "--resume", str(run_dir), env={"PATH": str(tmp_path)})
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        f"distloop: the run in {run_dir} has finished: nothing to resume"
    ]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_followed_run_reads_its_messages_file_as_untrusted(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """The tasks' messages.jsonl are on a shared file system anyone may write: bytes that
    are no UTF-8 and a line longer than any message are a warning each; the messages
    around them still arrive, and a job Slurm no longer knows ends with the last one. Of
    another task's file only its resource samples count, named by its folder whatever
    they claim, and a link to elsewhere is no task's folder."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "project.json").write_text(_submitted_project(tmp_path, 20, "crafted").read_text())
    run_dir = job_dir / "runs" / "999999"
    chief = run_dir / "tasks" / "worker-0"
    chief.mkdir(parents=True)
    (run_dir / "status.json").write_text(
        json.dumps({"slurm": {"job": "999999", "folder": str(job_dir), "messages_from": 0}})
    )
    step = StepMetrics(steps=[1], losses=[0.5], elapsed_s=[0.1]).model_dump_json()
    end = RunFinished(status="finished", last_step=1, final_loss=0.5, elapsed_s=0.1)
    (chief / "messages.jsonl").write_bytes(
        b"\xff\xfe\n" + step.encode() + b"\n" + b"x" * (MAX_LINE + 10) + b"\n"
        + end.model_dump_json().encode() + b"\n"
    )  # fmt: skip
    peer = run_dir / "tasks" / "worker-1"
    peer.mkdir()
    claimed = Resources(time=1.0, interval_s=1.0, cpu_percent=5.0, rss_bytes=1, task="chief:0")
    said_by_peer = Log(text="a peer's own line: the chief's stream says the run", task="worker:1")
    (peer / "messages.jsonl").write_text(
        f"{step}\n{said_by_peer.model_dump_json()}\n{claimed.model_dump_json()}\nnot json\n"
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "messages.jsonl").write_text(claimed.model_dump_json() + "\n")
    (run_dir / "tasks" / "worker-2").symlink_to(elsewhere)
    run = follow_job(run_dir, env=slurm)
    run.start()
    said: list = []
    _wait_for(lambda: said.extend(run.poll(0.5)) or run.done, "the end", timeout_s=60)
    warnings = [m.text for m in said if isinstance(m, Log) and m.level == "warning"]
    chief_said = [text for text in warnings if "worker-0/messages.jsonl" in text]
    assert len(chief_said) == 2 and "not a protocol message" in chief_said[0], warnings
    assert "is no protocol message" in chief_said[1], chief_said[1][:200]
    (peer_said,) = [text for text in warnings if text not in chief_said]
    assert "worker-1/messages.jsonl: not a protocol message: 'not json'" in peer_said
    assert [m.task for m in said if isinstance(m, Resources)] == ["worker:1"]
    assert said_by_peer not in said
    # Nothing after the last message (the file is not read again once the run has ended).
    assert [type(m) for m in said if not isinstance(m, Log | Resources)] == [
        StepMetrics,
        RunFinished,
    ]
    assert said[-1] == end
    assert "job 999999: UNKNOWN" in [m.text for m in said if isinstance(m, Log)]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_task_whose_software_differs_from_the_chief_s_is_named_by_the_follower(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """Each task of a job says its software as it starts, in its own messages file: the
    follower compares every task's with the chief's, as a local cluster does, and names
    the one that differs, once, before any step."""
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / "project.json").write_text(_submitted_project(tmp_path, 20, "skew").read_text())
    run_dir = job_dir / "runs" / "999998"
    (run_dir / "status.json").parent.mkdir(parents=True)
    (run_dir / "status.json").write_text(
        json.dumps({"slurm": {"job": "999998", "folder": str(job_dir), "messages_from": 0}})
    )
    software = {"python": "3.11.7", "numpy": "2.1.0", "tensorflow": "2.21.0"}
    said_by = {
        "worker-0": EnvironmentReady(digest="a", software=software),
        "worker-1": EnvironmentReady(digest="a", software=software),
        "worker-2": EnvironmentReady(digest="b", software={**software, "numpy": "2.0.2"}),
    }
    end = RunFinished(status="finished", last_step=1, final_loss=0.5, elapsed_s=0.1)
    for task, environment in said_by.items():
        (run_dir / "tasks" / task).mkdir(parents=True)
        last = f"{end.model_dump_json()}\n" if task == "worker-0" else ""
        (run_dir / "tasks" / task / "messages.jsonl").write_text(
            f"{environment.model_dump_json()}\n{last}"
        )
    run = follow_job(run_dir, env=slurm)
    run.start()
    said: list = []
    _wait_for(lambda: said.extend(run.poll(0.5)) or run.done, "the end", timeout_s=60)
    warnings = [m for m in said if isinstance(m, Log) and m.level == "warning"]
    assert [(m.task, m.text) for m in warnings] == [
        (
            "worker:2",
            "worker:2's environment differs from worker:0's: numpy 2.0.2 (worker:0: 2.1.0) "
            "(each task's environment.json has it whole)",
        )
    ]


@pytest.mark.slurm
@pytest.mark.slow
def test_a_job_id_slurm_hands_out_again_never_takes_an_earlier_run(
    slurm: dict[str, str], tmp_path: Path
) -> None:
    """A Slurm whose state was reset counts job ids from 1 again: the job folder's
    runs/<id>/ may hold an earlier job's run. The new job is cancelled and said in one line,
    and the earlier run's record is left as it was."""
    project = _submitted_project(tmp_path, 20, "job ids")
    job_dir = tmp_path / "job"
    first = distloop("submit", str(project), "--out", str(job_dir), env=slurm)
    assert first.returncode == 0, first.stderr
    job, _ = _job_and_run(first.stdout)
    subprocess.run(["scancel", job], env=slurm, timeout=30)
    earlier = job_dir / "runs" / str(int(job) + 1)  # the id the next job gets
    earlier.mkdir()
    record = json.dumps({"slurm": {"job": earlier.name, "folder": "/old", "messages_from": 0}})
    (earlier / "status.json").write_text(record)
    again = distloop("submit", str(project), "--out", str(job_dir), env=slurm)
    assert again.returncode == 1
    assert again.stderr.splitlines() == [
        f"distloop: {earlier} holds the run of an earlier job {earlier.name} (Slurm hands out "
        "job ids again after a reset): the new job is cancelled; submit into another --out "
        "folder"
    ]
    assert (earlier / "status.json").read_text() == record
    assert _squeue_state(slurm, earlier.name) in ("", "CANCELLED")
