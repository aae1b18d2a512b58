"""Clusters: real tasks on localhost (and across network namespaces), each its own process."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.cluster.blame import STALLED, cause, stopped_tasks
from distloop.engine.cluster.devices import devices_text, odd_worker
from distloop.engine.cluster_layout import (
    DEFAULT_COMMUNICATION_TIMEOUT_S,
    local_cluster_config,
    local_cluster_tasks,
    tf_config_for_run,
)
from distloop.engine.memory_check import available_memory_bytes
from distloop.engine.memory_estimate import memory_estimate
from distloop.engine.messages import RunFailed, RunFinished, RunStarted, StepMetrics
from distloop.engine.netns import ENV_SWITCH, PrivateNetworkUnavailable, start_private_network
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project, load_project_data
from distloop.engine.run_folder import class_names, read_metrics, read_status, unknown_entries
from support.clusters import listening_ports, multi_worker, step_lines
from support.data_folders import write_image_folder
from support.distloop_testing import REPO, distloop, example_data, run_engine, synthetic_project


def parameter_server(steps: int = 30) -> dict:
    data = synthetic_project(1, steps=steps)
    data["name"] = "ps test"
    data["strategy"] = {"kind": "parameter_server"}
    data["tf_config"] = {
        "cluster": {
            "chief": ["coordinator.example:2222"],
            "worker": ["w0.example:2222", "w1.example:2222"],
            "ps": ["ps0.example:2222"],
        },
        "task": {"type": "chief", "index": 0},
    }
    return data


# --- layout and TF_CONFIG rules (no TensorFlow) ------------------------------------------


def test_local_layout_keeps_loopback_ports_and_replaces_remote_hosts() -> None:
    local = {"worker": ["127.0.0.1:23001", "localhost:23002"]}
    config = local_cluster_config(
        load_project_data(multi_worker(tf_config={"cluster": local, "task": {"type": "worker"}}))
    )
    assert config.cluster == local

    remote = local_cluster_config(load_project_data(parameter_server()))
    assert [str(t) for t in remote.tasks()] == ["chief:0", "worker:0", "worker:1", "ps:0"]
    addresses = [a for job in remote.cluster.values() for a in job]
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert len(set(addresses)) == 4
    assert str(remote.task) == "chief:0"
    # The plan the window shows while editing: the same tasks, with no port chosen.
    assert local_cluster_tasks(load_project_data(parameter_server())) == remote.tasks()

    three = local_cluster_config(load_project_data(multi_worker()), workers=3)
    assert list(three.cluster) == ["worker"] and len(three.cluster["worker"]) == 3


def test_local_layout_refuses_what_cannot_run() -> None:
    with pytest.raises(ProblemsError, match="not mirrored"):
        local_cluster_config(load_project_data(example_data("seed")))
    data = multi_worker(
        tf_config={
            "cluster": {"worker": ["a:1", "b:1"], "evaluator": ["c:1"]},
            "task": {"type": "worker"},
        }
    )
    with pytest.raises(ProblemsError, match="evaluator"):
        local_cluster_config(load_project_data(data))
    with pytest.raises(ProblemsError, match="evaluator"):
        local_cluster_tasks(load_project_data(data))


def test_run_task_takes_the_environment_s_tf_config_over_the_project_s() -> None:
    project = load_project_data(parameter_server())
    picked = tf_config_for_run(project, "worker:1")
    assert str(picked.task) == "worker:1" and picked.cluster == project.tf_config.cluster

    env_cluster = {"chief": ["c:1"], "worker": ["w:1"], "ps": ["p:1"]}
    environ = {
        "TF_CONFIG": json.dumps(
            # Kubeflow's TFJob adds "environment"; it must not stop the import.
            {"cluster": env_cluster, "task": {"type": "ps", "index": 0}, "environment": "cloud"}
        )
    }
    from_env = tf_config_for_run(project, None, environ)
    assert from_env.cluster == env_cluster and str(from_env.task) == "ps:0"
    assert str(tf_config_for_run(project, "worker:0", environ).task) == "worker:0"

    with pytest.raises(ProblemsError, match="index"):
        tf_config_for_run(project, "worker:5", environ)
    with pytest.raises(ProblemsError, match="TYPE:INDEX"):
        tf_config_for_run(project, "boss:1")
    with pytest.raises(ProblemsError, match="multi-machine"):
        tf_config_for_run(load_project_data(example_data("seed")), "worker:0")
    # Strategies that need no cluster ignore a TF_CONFIG left in the environment.
    assert tf_config_for_run(load_project_data(example_data("seed")), None, environ) is None


def test_run_with_a_bad_task_says_why_before_starting(tmp_path) -> None:
    seed = tmp_path / "seed.json"
    seed.write_text(json.dumps(example_data("seed")))
    result = distloop("run", str(seed), "--task", "worker:0", "--out", str(tmp_path / "run"))
    assert result.returncode == 1
    assert "--task needs a multi-machine strategy" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_cluster_is_refused_before_it_starts_as_a_run_would_be(tmp_path) -> None:
    """``distloop cluster`` judges a project by the rules ``distloop run`` uses
    (engine.run_checks): memory for every task it starts here, and the data folders."""
    big = multi_worker()
    units = 1000  # grown until one task needs half of what is free here, three of them more
    while memory_estimate(load_project_data(big)).total < available_memory_bytes() / 2:
        units = int(units * 1.2)
        wide = {"kind": "dense", "units": units}
        big["model"]["layers"] = [wide, wide, {"kind": "dense", "units": 3}]
    one_class = multi_worker()
    write_image_folder(tmp_path / "images", classes=("circle",))
    one_class["model"]["input_shape"] = [8, 8, 1]
    one_class["data"] = {"source": "image_folder", "path": str(tmp_path / "images")}
    for name, data, says in (
        ("big", big, "memory for its 3 tasks ("),
        ("one class", one_class, "data.path: "),
    ):
        project = tmp_path / f"{name}.json"
        project.write_text(json.dumps(data))
        out = tmp_path / f"run {name}"
        result = distloop("cluster", str(project), "--workers", "3", "--out", str(out))
        assert result.returncode == 1, result.stderr
        assert says in result.stderr and "Traceback" not in result.stderr
        assert not out.exists()  # no task started, no run folder left behind


# --- real clusters -----------------------------------------------------------------------


def private_network_allowed() -> bool:
    try:
        start_private_network().close()
    except PrivateNetworkUnavailable:
        return False
    return True


def ports_while_listening(out: Path, process: subprocess.Popen) -> tuple[set[int], set[int]]:
    """A running cluster's task ports, once each listens in its task's namespace, and the
    ports listening at that moment in this test's own namespace."""
    deadline = time.monotonic() + 180
    while process.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError, KeyError):
            tasks = read_status(out)["tasks"].values()
            wanted = {(t["pid"], int(t["address"].rsplit(":", 1)[1])) for t in tasks}
            if all(port in listening_ports(Path(f"/proc/{pid}/net")) for pid, port in wanted):
                return {port for _, port in wanted}, listening_ports(Path("/proc/self/net"))
        time.sleep(0.05)
    raise AssertionError("the cluster's tasks never all listened while it ran")


@pytest.mark.slow
def test_two_workers_give_the_single_process_trace_and_the_cli_prints_it(tmp_path) -> None:
    """MultiWorkerMirrored over 2 processes, global batch fixed: the losses of one process.

    Their gRPC ports listen in the cluster's private network, not in the machine's
    (where the system allows one; elsewhere the run says it does without).
    """
    path = tmp_path / "project.json"
    path.write_text(json.dumps(multi_worker()))
    out = tmp_path / "run"
    with (tmp_path / "stdout").open("w") as stdout, (tmp_path / "stderr").open("w") as stderr:
        command = [
            sys.executable,
            "-m",
            "distloop.gui.launcher",
            "cluster",
            str(path),
            "--out",
            str(out),
        ]
        process = subprocess.Popen(command, cwd=REPO, stdout=stdout, stderr=stderr, text=True)
        try:
            task_ports, host_ports = ports_while_listening(out, process)
            process.wait(timeout=180)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    cluster_out, cluster_err = ((tmp_path / name).read_text() for name in ("stdout", "stderr"))
    single_data = multi_worker()
    single_data["strategy"] = {"kind": "one_device"}
    single = run_engine(load_project_data(single_data), None)

    assert process.returncode == 0, cluster_err[-3000:]
    assert len(task_ports) == 2
    if private_network_allowed():
        assert not task_ports & host_ports, (task_ports, host_ports)
        assert "the tasks run in a private network" in (out / "engine.log").read_text()
    else:
        assert "[engine] the tasks run in this machine's network (" in cluster_err
    # Compared once every worker's strategy existed, before the first collective.
    assert "the workers' devices agree: 1 CPU on each" in (out / "engine.log").read_text()
    steps, losses = step_lines(cluster_out)
    assert steps == list(range(1, 21))
    assert single["steps"] == steps
    np.testing.assert_allclose(losses, single["losses"], rtol=1e-5)

    # The top level is what `distloop run` writes; each task has its own folder.
    np.testing.assert_allclose(np.float32(read_metrics(out)["loss"]), losses, rtol=1e-6)
    status = read_status(out)
    assert status["status"] == "finished"
    # What runs, for the whole cluster: the kind chosen, both workers' replicas and devices.
    assert (status["strategy"], status["num_replicas"]) == ("multi_worker_mirrored", 2)
    assert [device.split("/device:")[0] for device in status["devices"]] == [
        "/job:worker/replica:0/task:0",
        "/job:worker/replica:0/task:1",
    ]
    assert "distloop: multi_worker_mirrored with 2 replica(s) on /job:worker" in cluster_err
    assert "task:1/device:CPU:0 (TensorFlow" in cluster_err
    # The merged stream's phases are the reporting task's, as its steps are.
    assert "distloop: worker:0: tracing the step…" in cluster_err
    assert "distloop: worker:0: first step…" in cluster_err
    assert "distloop: worker:1: " not in cluster_err
    ran = load_project(out / "project.json")
    assert ran.strategy.communication_timeout_s == DEFAULT_COMMUNICATION_TIMEOUT_S
    assert str(ran.tf_config.task) == "worker:0"
    for task in ("worker-0", "worker-1"):
        assert read_status(out / "tasks" / task)["status"] == "finished"
    assert "worker:1 at 127.0.0.1:" in cluster_err
    # Both workers save (a save may be collective); only the chief's model lands, once.
    assert sorted(out.rglob("model*.keras")) == [out / "tasks" / "worker-0" / "model.keras"]
    assert json.loads((out / "tasks" / "worker-0" / "model.json").read_text())["step"] == 20
    assert not list(out.rglob(".*.tmp-*"))
    assert unknown_entries(out) == []  # a cluster's top folder and its tasks' folders


@pytest.mark.slow
def test_a_cluster_of_custom_step_code_records_its_named_losses_at_the_top(tmp_path) -> None:
    """The GAN example on 2 workers: the top-level metrics.csv has the chief's named losses,
    in the columns a single-process run writes (they were missing: only loss was kept)."""
    examples = REPO / "resources" / "examples"
    shutil.copy(examples / "gan_step.py", tmp_path / "gan_step.py")
    data = json.loads((examples / "gan.json").read_text())
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["training"]["steps"] = 4
    path = tmp_path / "gan.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "run"
    cluster = distloop("cluster", str(path), "--out", str(out))
    assert cluster.returncode == 0, cluster.stderr[-3000:]

    top, chief = read_metrics(out), read_metrics(out / "tasks" / "worker-0")
    assert list(top) == ["step", "loss", "elapsed_s", "generator", "discriminator"]
    assert list(chief) == list(top)
    assert top["step"] == list(range(1, 5))
    for column in ("loss", "generator", "discriminator"):
        assert top[column] == chief[column], column


def test_workers_keep_the_same_share_of_each_batch_with_either_input_distribution(
    tmp_path,
) -> None:
    """Splitting on the host must cut each worker's share as TensorFlow's DATA sharding does.

    Batches of 7 over 2 workers (4/3) and a short batch of 2 every 5 steps (1/1); the
    chief's own replica loss is compared, not only the reduced loss. The second cluster
    runs in the machine's network, as where the system allows no private one, and says so.
    """
    metrics = {}
    for method in ("split_on_host", "distributed_dataset"):
        data = multi_worker(steps=12)
        data["data"].update(examples=30, global_batch_size=7, shuffle_buffer=30)
        data["training"].update(per_replica_losses=True, input_distribution=method)
        path = tmp_path / f"{method}.json"
        path.write_text(json.dumps(data))
        env = {**os.environ, ENV_SWITCH: "0"} if method == "distributed_dataset" else None
        cluster = distloop("cluster", str(path), "--out", str(tmp_path / method), env=env)
        assert cluster.returncode == 0, cluster.stderr[-3000:]
        warning = f"[engine] the tasks run in this machine's network ({ENV_SWITCH}=0 is set)"
        assert (warning in cluster.stderr) == (env is not None), cluster.stderr[-3000:]
        metrics[method] = read_metrics(tmp_path / method)
    host, dataset = metrics["split_on_host"], metrics["distributed_dataset"]
    assert host["step"] == dataset["step"] == list(range(1, 13))
    for column in ("loss", "replica_0"):
        np.testing.assert_allclose(host[column], dataset[column], rtol=1e-6)
    assert not np.allclose(host["replica_0"], host["loss"])  # a share, not the whole batch


@pytest.mark.slow
def test_parameter_server_cluster_trains(tmp_path, tmp_path_factory) -> None:
    """On an image folder with an unreadable file skipped: the coordinator says so and
    leaves the class names that ``distloop predict`` and Try it show."""
    images = write_image_folder(tmp_path_factory.mktemp("images"), per_class=40)
    (images / "square" / "empty.png").write_bytes(b"")
    project = parameter_server()
    project["model"]["input_shape"] = [8, 8, 1]
    project["data"] = {
        "source": "image_folder",
        "path": str(images),
        "global_batch_size": 32,
        "shuffle_buffer": 120,
        "on_bad_file": "skip",
    }
    cluster = LocalCluster(load_project_data(project), tmp_path)
    cluster.start()
    started, steps, losses, terminal = None, [], [], None
    try:
        deadline = time.monotonic() + 180
        for message in cluster.messages():
            assert time.monotonic() < deadline, "the cluster run timed out"
            if isinstance(message, RunStarted):
                started = message
            elif isinstance(message, StepMetrics):
                steps += message.steps
                losses += message.losses
            elif isinstance(message, RunFinished | RunFailed):
                terminal = message
    finally:
        cluster.close()
    assert isinstance(terminal, RunFinished) and terminal.status == "finished", terminal
    assert started.strategy.startswith("ParameterServerStrategy")
    assert any("skipped 1 unreadable image(s)" in note for note in started.warnings)
    assert steps == list(range(1, 31))
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    states = {task.name: task.state for task in cluster.tasks()}
    assert states == {
        "chief:0": "finished",
        "worker:0": "stopped",
        "worker:1": "stopped",
        "ps:0": "stopped",
    }
    assert read_metrics(tmp_path)["step"] == steps
    assert read_status(tmp_path / "tasks" / "ps-0")["status"] == "stopped"
    # The coordinator saves the model it reads from the ps task.
    assert sorted(tmp_path.rglob("model*.keras")) == [
        tmp_path / "tasks" / "chief-0" / "model.keras"
    ]
    chief = tmp_path / "tasks" / "chief-0"
    assert class_names([chief], 3) == ["circle", "square", "triangle"]


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_naming_it(tmp_path) -> None:
    cluster = LocalCluster(load_project_data(multi_worker(steps=1_000_000)), tmp_path)
    cluster.start()
    messages, killed_at = [], None
    try:
        deadline = time.monotonic() + 180
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            for message in cluster.poll(0.2):
                messages.append(message)
                if isinstance(message, StepMetrics) and killed_at is None:
                    pid = next(t.pid for t in cluster.tasks() if t.name == "worker:1")
                    os.kill(pid, signal.SIGKILL)
                    killed_at = time.monotonic()
        assert killed_at is not None, f"the run ended before its first step: {messages[-1]}"
        reported_after = time.monotonic() - killed_at
    finally:
        cluster.close()
    failure = messages[-1]
    assert isinstance(failure, RunFailed)
    assert failure.task == "worker:1"
    assert failure.message.startswith("worker:1 failed:") and "SIGKILL" in failure.message
    assert reported_after < 20, f"took {reported_after:.1f} s"
    status = read_status(tmp_path)
    assert status["status"] == "failed" and status["task"] == "worker:1"
    assert {t.state for t in cluster.tasks()} <= {"failed", "stopped"}


@pytest.mark.slow
def test_a_stalled_worker_is_named_in_one_line_not_its_healthy_peer(tmp_path) -> None:
    """SIGSTOP of worker 1: worker 0's collectives abort once the coordination service
    misses worker 1's heartbeats, and that healthy worker was blamed in a 100-line
    TensorFlow error naming worker 1 only deep inside."""
    data = multi_worker(steps=1_000_000)
    data["strategy"]["communication_timeout_s"] = 10
    cluster = LocalCluster(load_project_data(data), tmp_path)
    cluster.start()
    messages: list = []
    stalled = False
    try:
        deadline = time.monotonic() + 180
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            for message in cluster.poll(0.2):
                messages.append(message)
                if isinstance(message, StepMetrics) and not stalled:
                    pid = next(t.pid for t in cluster.tasks() if t.name == "worker:1")
                    os.kill(pid, signal.SIGSTOP)
                    stalled = True
    finally:
        cluster.close()
    failure = messages[-1]
    assert isinstance(failure, RunFailed) and failure.known
    assert failure.task == "worker:1"
    assert failure.message.startswith("worker:1 stopped responding: ")
    assert "\n" not in failure.message and "worker:0" not in failure.message
    # The healthy peer's TensorFlow error stays, for the log: the heartbeats it missed, or
    # its collective's deadline, whichever TensorFlow noticed first, or, on a loaded
    # machine, TensorFlow's abort of that peer (SIGABRT) while its collective waited.
    assert failure.traceback.startswith("worker:0: ")
    assert any(
        said in failure.traceback for said in ("heartbeats", "timed out", "killed by SIGABRT")
    ), failure.traceback
    status = read_status(tmp_path)
    assert status["status"] == "failed" and status["task"] == "worker:1"


def test_the_task_a_peers_heartbeat_error_names_is_blamed() -> None:
    peer = RunFailed(
        error_type="UnavailableError",
        message="Graph execution error:\n\nCollective ops is aborted by: Error reported from "
        "/job:worker/task:2: The following tasks are unhealthy (stopped sending heartbeats):\n"
        "/job:worker/replica:0/task:2\nThe tasks have crashed.",
        task="worker:0",
    )
    blamed = cause([peer], ["worker:0", "worker:1", "worker:2"])
    assert (blamed.task, blamed.error_type, blamed.known) == ("worker:2", STALLED, True)
    assert "worker:0: UnavailableError" in blamed.traceback
    died = RunFailed(error_type="EngineDied", message="killed by SIGKILL", task="worker:1")
    assert cause([peer, died], ["worker:0", "worker:1", "worker:2"]) is died
    # a task outside this cluster is never named
    assert cause([peer], ["worker:0", "worker:1"]) is peer


def test_the_worker_whose_devices_are_not_its_peers_is_named() -> None:
    """What MultiWorkerMirrored's tasks say as their strategies exist (this machine has
    no GPU to make a real cluster differ): the odd one out, else none."""
    gpus = [f"/job:worker/replica:0/task:{{}}/device:GPU:{i}" for i in range(2)]
    cpu = "/job:worker/replica:0/task:{}/device:CPU:0"
    two = {f"worker:{t}": [d.format(t) for d in gpus] for t in range(3)}
    assert odd_worker(two, "worker:0") is None
    assert devices_text(two["worker:0"]) == "2 GPU"
    one = {**two, "worker:2": [gpus[0].format(2)]}
    assert odd_worker(one, "worker:0") == ("worker:2", "worker:0")
    # the chief's devices are the reference on a tie
    assert odd_worker({"worker:0": [cpu.format(0)], "worker:1": two["worker:1"]}, "worker:0") == (
        "worker:1",
        "worker:0",
    )
    assert devices_text([cpu.format(0), *two["worker:0"]]) == "1 CPU + 2 GPU"


@pytest.mark.slow
def test_a_stopped_process_is_blamed_when_a_peer_s_collective_times_out() -> None:
    """The collective's deadline can fire before the missed heartbeats are noticed; its
    error names nobody, and the task whose process is stopped is the one to name."""
    peer = RunFailed(
        error_type="DeadlineExceededError", message="Collective has timed out", task="worker:0"
    )
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        os.kill(sleeper.pid, signal.SIGSTOP)
        deadline = time.monotonic() + 10
        while not stopped_tasks({"worker:1": sleeper.pid}):
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        sleeper.kill()
        sleeper.wait()
    blamed = cause([peer], ["worker:0", "worker:1"], ["worker:1"])
    assert (blamed.task, blamed.error_type, blamed.known) == ("worker:1", STALLED, True)
    assert cause([peer], ["worker:0", "worker:1"]) is peer
    own = RunFailed(error_type="DataError", message="bad row", task="worker:0")
    assert cause([own], ["worker:0", "worker:1"], ["worker:1"]) is own


def test_a_stopped_process_is_blamed_not_the_peer_tensorflow_aborted() -> None:
    """On a loaded machine TensorFlow aborted the healthy worker (SIGABRT) while its
    collective waited on the stopped one, and the dead healthy worker was named (the
    stalled-worker test failed so in a clean-clone CI run at load 14). A task that died
    on its own, with nobody stopped, is still the one named."""
    aborted = RunFailed(
        error_type="EngineDied",
        message="the engine process was killed by SIGABRT",
        exit_code=-6,
        task="worker:0",
    )
    blamed = cause([aborted], ["worker:0", "worker:1"], ["worker:1"])
    assert (blamed.task, blamed.error_type, blamed.known) == ("worker:1", STALLED, True)
    assert blamed.traceback.startswith("worker:0: EngineDied: the engine process was killed")
    assert cause([aborted], ["worker:0", "worker:1"]) is aborted
    assert cause([aborted], ["worker:0", "worker:1"], ["worker:0"]) is aborted


def test_a_server_task_ends_when_its_coordinator_is_gone(tmp_path) -> None:
    """`distloop run --task ps:0` on a real cluster: it serves until the chief is gone."""
    coordinator = socket.create_server(("127.0.0.1", 0))
    ports = [coordinator.getsockname()[1], *_free_ports(3)]
    project = parameter_server()
    project["tf_config"]["cluster"] = {
        "chief": [f"127.0.0.1:{ports[0]}"],
        "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
        "ps": [f"127.0.0.1:{ports[3]}"],
    }
    path = tmp_path / "project.json"
    path.write_text(json.dumps(project))
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "engine",
            str(path),
            "--task",
            "ps:0",
            "--out",
            str(tmp_path / "ps"),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:
            if "serving grpc://" in line:
                break
        time.sleep(2)  # the server sees its coordinator at least once
        coordinator.close()
        gone_at = time.monotonic()
        _, err = server.communicate(timeout=60)
        ended_after = time.monotonic() - gone_at
    finally:
        coordinator.close()
        if server.poll() is None:
            server.kill()
            server.wait()
    assert server.returncode == 0, err[-2000:]
    assert 5 < ended_after < 30
    assert read_status(tmp_path / "ps")["status"] == "finished"


def _free_ports(count: int) -> list[int]:
    sockets = [socket.create_server(("127.0.0.1", 0)) for _ in range(count)]
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


# --- across a real network interface -----------------------------------------------------


def _ip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.mark.root
@pytest.mark.slow
def test_two_tasks_in_two_network_namespaces_train_over_a_veth_pair(tmp_path) -> None:
    """Each worker in its own network namespace: the collectives really cross an interface."""
    if shutil.which("ip") is None:
        pytest.skip("the `ip` command (iproute2) is not installed")
    suffix = str(os.getpid())
    spaces = (f"dl{suffix}a", f"dl{suffix}b")
    links = (f"dlv{suffix}a", f"dlv{suffix}b")
    addresses = ("10.251.0.1", "10.251.0.2")
    processes: list[subprocess.Popen] = []
    created: list[str] = []
    try:
        for space in spaces:
            made = _ip("netns", "add", space)
            if made.returncode != 0:
                pytest.skip(f"cannot create a network namespace: {made.stderr.strip()}")
            created.append(space)
        setup = [
            ("link", "add", links[0], "type", "veth", "peer", "name", links[1]),
            *[
                ("link", "set", link, "netns", space)
                for link, space in zip(links, spaces, strict=True)
            ],
            *[
                cmd
                for link, space, address in zip(links, spaces, addresses, strict=True)
                for cmd in (
                    ("-n", space, "addr", "add", f"{address}/24", "dev", link),
                    ("-n", space, "link", "set", link, "up"),
                    ("-n", space, "link", "set", "lo", "up"),
                )
            ],
        ]
        for args in setup:
            done = _ip(*args)
            if done.returncode != 0:
                pytest.skip(f"cannot set up the veth pair (ip {' '.join(args)}): {done.stderr}")

        cluster = {"worker": [f"{address}:2222" for address in addresses]}
        path = tmp_path / "project.json"
        path.write_text(
            json.dumps(multi_worker(tf_config={"cluster": cluster, "task": {"type": "worker"}}))
        )
        for index, space in enumerate(spaces):
            command = [
                "ip",
                "netns",
                "exec",
                space,
                sys.executable,
                "-m",
                "distloop.engine",
                str(path),
            ]
            command += ["--task", f"worker:{index}", "--out", str(tmp_path / f"w{index}")]
            processes.append(
                subprocess.Popen(
                    command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
                )
            )
        outputs = [process.communicate(timeout=240) for process in processes]
        sent = json.loads(_ip("-n", spaces[0], "-j", "-s", "link", "show", links[0]).stdout)
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.wait()
        for space in created:
            _ip("netns", "del", space)

    for process, (_, err) in zip(processes, outputs, strict=True):
        assert process.returncode == 0, err[-3000:]
    traces = [step_lines(out) for out, _ in outputs]
    assert traces[0][0] == list(range(1, 21))
    np.testing.assert_array_equal(traces[0][1], traces[1][1])
    assert traces[0][1][-1] < traces[0][1][0]
    # The gradients' all-reduce went over the veth pair, not loopback.
    assert sent[0]["stats64"]["tx"]["bytes"] > 10_000
    assert read_status(tmp_path / "w0")["status"] == "finished"
