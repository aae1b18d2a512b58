"""``distloop launch``: a cluster's tasks started on real hosts over SSH (network
namespaces, each with its own sshd), followed here as one run; and the JSON-lines
channel (``distloop run --messages``) that carries each task's messages back."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.cluster import preflight as preflight_module
from distloop.engine.cluster.preflight import preflight
from distloop.engine.cluster.ssh import SshLaunch, launch_hosts
from distloop.engine.config import SshHost
from distloop.engine.message_stream import read_message
from distloop.engine.messages import Log, Message, RunFinished, RunStarted, StepMetrics
from distloop.engine.project_file import load_project_data
from distloop.engine.run_folder import read_metrics, read_status
from distloop.engine.tf_config import TFConfig
from support.clusters import multi_worker, step_lines
from support.distloop_testing import CLI, REPO, distloop, run_engine
from support.ssh_hosts import SshHosts, ssh_hosts


def test_run_messages_are_json_lines_and_stdin_is_the_control_channel(tmp_path: Path) -> None:
    """Every stdout line is a protocol message; the end of stdin stops the run."""
    project = tmp_path / "project.json"
    data = multi_worker(steps=20)
    data["strategy"] = {"kind": "one_device"}
    project.write_text(json.dumps(data))
    run = subprocess.Popen(
        [*CLI, "run", str(project), "--out", str(tmp_path / "a"), "--messages"],
        cwd=REPO,
        stdin=subprocess.PIPE,  # held open: the run goes to the end
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert run.stdout is not None and run.stdin is not None
    lines = run.stdout.read().splitlines()
    assert run.wait(timeout=240) == 0
    run.stdin.close()
    messages = [read_message(line) for line in lines]
    assert isinstance(messages[-1], RunFinished) and messages[-1].status == "finished"
    assert any(isinstance(m, RunStarted) for m in messages)
    steps = [s for m in messages if isinstance(m, StepMetrics) for s in m.steps]
    assert steps == list(range(1, 21))

    ended = subprocess.run(
        [*CLI, "run", str(project), "--out", str(tmp_path / "b"), "--messages"],
        cwd=REPO,
        stdin=subprocess.DEVNULL,  # the launcher is gone from the start
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert ended.returncode == 130
    assert "the control channel closed: stopping after the current step" in ended.stderr
    assert read_status(tmp_path / "b")["status"] == "stopped"


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    with ssh_hosts(tmp_path_factory.mktemp("hosts"), 2) as made:
        yield made


def _project(hosts: SshHosts, folder: Path, steps: int = 20) -> Path:
    cluster = {"worker": [f"{address}:2222" for address in hosts.addresses]}
    path = folder / "project.json"
    path.write_text(
        json.dumps(multi_worker(steps, {"cluster": cluster, "task": {"type": "worker"}}))
    )
    return path


def _launch(hosts: SshHosts, project: Path, out: Path, remote: Path, *more: str) -> list[str]:
    return [
        *CLI, "launch", str(project), "--out", str(out),
        "--ssh-config", str(hosts.ssh_config), "--remote-dir", str(remote),
        "--remote-command", f"{sys.executable} -m distloop.gui.launcher", *more,
    ]  # fmt: skip


@pytest.mark.sshd
@pytest.mark.slow
def test_a_launch_over_ssh_gives_the_one_process_trace(hosts: SshHosts, tmp_path: Path) -> None:
    """Two workers, each on its own host behind its own sshd: the losses of one process,
    the run's top level here, and the chief's run folder copied back."""
    out = tmp_path / "run"
    done = subprocess.run(
        _launch(hosts, _project(hosts, tmp_path), out, tmp_path / "remote"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    single_data = multi_worker()
    single_data["strategy"] = {"kind": "one_device"}
    single = run_engine(load_project_data(single_data), None)
    steps, losses = step_lines(done.stdout)
    assert steps == single["steps"] == list(range(1, 21))
    np.testing.assert_allclose(losses, single["losses"], rtol=1e-5)
    assert read_status(out)["status"] == "finished"
    assert read_status(out)["num_replicas"] == 2
    np.testing.assert_allclose(np.float32(read_metrics(out)["loss"]), losses, rtol=1e-6)
    chief = out / "tasks" / "worker-0"
    assert (chief / "model.keras").is_file() and read_status(chief)["status"] == "finished"
    assert f"worker:1 at {hosts.addresses[1]}:2222" in done.stderr
    assert "started over SSH" in (out / "engine.log").read_text()
    assert "the workers' devices agree: 1 CPU on each" in (out / "engine.log").read_text()


@pytest.mark.sshd
@pytest.mark.slow
def test_a_host_reached_by_another_name_and_port_than_its_tf_config_s(tmp_path: Path) -> None:
    """The project's launch.hosts: worker 0's host answers ssh only at a second address of
    its own, on port 2200 (its TF_CONFIG address has no sshd), and each host has its own
    distloop command and runs folder; the pre-flight and the launch go in that way, the
    tasks talk over their TF_CONFIG addresses, and the chief's folder comes back."""
    command = f"{sys.executable} -m distloop.gui.launcher"
    with ssh_hosts(tmp_path / "hosts", 2, doors={0: 2200}) as hosts:
        path = _project(hosts, tmp_path)
        data = json.loads(path.read_text())
        door, port = hosts.doors[0]
        data["launch"] = {
            "hosts": {
                hosts.addresses[0]: {"destination": f"root@{door}", "port": port,
                                     "command": command, "remote_dir": str(tmp_path / "a")},
                hosts.addresses[1]: {"command": command, "remote_dir": str(tmp_path / "b")},
            }
        }  # fmt: skip
        path.write_text(json.dumps(data))
        out = tmp_path / "run"
        done = subprocess.run(
            [*CLI, "launch", str(path), "--out", str(out), "--ssh-config", str(hosts.ssh_config)],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "preflight: 2 host(s), 2 task(s) ready" in done.stderr
    assert step_lines(done.stdout)[0] == list(range(1, 21))
    assert read_status(tmp_path / "a" / "run" / "tasks" / "worker-0")["status"] == "finished"
    assert read_status(tmp_path / "b" / "run" / "tasks" / "worker-1")["status"] == "finished"
    assert (out / "tasks" / "worker-0" / "model.keras").is_file()
    assert load_project_data(json.loads((out / "project.json").read_text())).launch == (
        load_project_data(data).launch
    )


@pytest.mark.sshd
@pytest.mark.slow
def test_killing_the_launcher_s_ssh_ends_the_remote_tasks(hosts: SshHosts, tmp_path: Path) -> None:
    """The connection drops (the ssh clients die with the launcher): each task stops on
    its host with a checkpoint, and nothing of the run is left running there."""
    out = tmp_path / "run"
    launcher = subprocess.Popen(
        _launch(hosts, _project(hosts, tmp_path, steps=100_000), out, tmp_path / "remote"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "metrics.csv").exists() or len(read_metrics(out)["step"]) < 20:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the cluster never trained"
            time.sleep(0.5)
        os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and its ssh clients
        launcher.wait(timeout=30)
    finally:
        if launcher.poll() is None:
            os.killpg(launcher.pid, signal.SIGKILL)
            launcher.wait()
    deadline = time.monotonic() + 60
    while left := [p for space in hosts.namespaces for p in _processes_besides_sshd(space)]:
        assert time.monotonic() < deadline, f"still running on the hosts a minute after: {left}"
        time.sleep(1)
    for task in ("worker-0", "worker-1"):
        status = read_status(tmp_path / "remote" / "run" / "tasks" / task)
        assert status["status"] == "stopped", status


def _engine_pid(namespace: str) -> int:
    """The engine process of the one task running in a host (the spawned child of its
    ``distloop run``)."""
    pids = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
    ).stdout.split()
    for pid in pids:
        with contextlib.suppress(OSError):
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return int(pid)
    raise AssertionError(f"no engine process in {namespace}")


@pytest.mark.sshd
@pytest.mark.slow
def test_dump_of_a_launch_names_the_remote_task_that_is_stopped(
    hosts: SshHosts, tmp_path: Path
) -> None:
    """Worker 1's engine stopped (SIGSTOP) on its host: ``distloop cluster --dump DIR``
    has every task dump its stacks into its folder on its host (over ssh; the pids in the
    launch's status.json are its ssh clients', which SIGUSR1 would end), names worker 1
    as the one that did not answer, and the launch goes on to stop when asked."""
    out = tmp_path / "run"
    project = _project(hosts, tmp_path, steps=100_000)
    launcher = subprocess.Popen(
        _launch(hosts, project, out, tmp_path / "remote", "--quiet"),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "metrics.csv").exists() or len(read_metrics(out)["step"]) < 20:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the launch never reached step 20"
            time.sleep(0.3)
        engine = _engine_pid(hosts.namespaces[1])
        os.kill(engine, signal.SIGSTOP)
        try:
            dumped = distloop("cluster", "--dump", str(out), timeout_s=90)
        finally:
            with contextlib.suppress(ProcessLookupError):  # ended by a failed cluster
                os.kill(engine, signal.SIGCONT)
        launcher.send_signal(signal.SIGINT)
        launcher.communicate(timeout=120)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert dumped.returncode == 0, dumped.stderr
    assert dumped.stdout.splitlines()[0].startswith("worker:1 did not answer: it is stopped")
    chief = tmp_path / "remote" / "run" / "tasks" / "worker-0" / "stacks.txt"
    assert f"{hosts.addresses[0]}:{chief}" in dumped.stderr, dumped.stderr
    stacks = chief.read_text()
    assert "most recent call first" in stacks and "child_main.py" in stacks
    assert read_status(out)["status"] == "stopped"


@pytest.mark.sshd
@pytest.mark.slow
def test_a_launch_without_steps_for_a_while_says_where_each_remote_task_stands(
    hosts: SshHosts, tmp_path: Path
) -> None:
    """The launcher's quiet-time dump, as a local cluster's: worker 1's engine stopped on
    its host, the run names it in one line once no step came for the quiet time."""
    project = load_project_data(json.loads(_project(hosts, tmp_path, steps=100_000).read_text()))
    launch = SshLaunch(
        run_name="quiet",
        ssh_config=hosts.ssh_config,
        remote_command=f"{sys.executable} -m distloop.gui.launcher",
        remote_dir=str(tmp_path / "remote"),
    )
    cluster = LocalCluster(project, tmp_path / "run", placement=launch)
    cluster.quiet_dump_s = 3.0
    said, stopped = None, None
    seen: list[Message] = []
    try:
        cluster.start()
        deadline = time.monotonic() + 240
        while not cluster.done:
            assert time.monotonic() < deadline, "the launch timed out"
            for message in cluster.poll(0.2):
                seen.append(message)
                if isinstance(message, StepMetrics) and stopped is None and message.steps[-1] > 20:
                    stopped = _engine_pid(hosts.namespaces[1])
                    os.kill(stopped, signal.SIGSTOP)
                elif (
                    isinstance(message, Log)
                    and message.text.startswith("no step for")
                    and stopped is not None  # not a pause of a loaded machine before it
                ):
                    said = message.text
                    os.kill(stopped, signal.SIGCONT)
                    cluster.request_stop()
    finally:
        if stopped is not None:
            with contextlib.suppress(ProcessLookupError):  # ended by a failed cluster
                os.kill(stopped, signal.SIGCONT)
        cluster.close()
        launch.close()
    assert said is not None, [m for m in seen if not isinstance(m, StepMetrics)][-8:]
    assert "worker:1 did not answer: it is stopped, or stuck outside Python" in said, said
    chief = tmp_path / "remote" / "quiet" / "tasks" / "worker-0" / "stacks.txt"
    assert f"{hosts.addresses[0]}:{chief}" in said
    assert "most recent call first" in chief.read_text()


def _processes_besides_sshd(namespace: str) -> list[str]:
    pids = subprocess.run(
        ["ip", "netns", "pids", namespace], capture_output=True, text=True, timeout=30
    ).stdout.split()
    names = []
    for pid in pids:
        try:
            name = Path(f"/proc/{pid}/comm").read_text().strip()
        except OSError:  # ended meanwhile
            continue
        if name != "sshd":
            names.append(f"{pid} {name}")
    return names


@pytest.mark.sshd
def test_a_host_without_the_key_is_one_line_and_no_hang(hosts: SshHosts, tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(
        hosts.ssh_config.read_text().replace(str(hosts.client_key), str(tmp_path / "no_key"))
    )
    started = time.monotonic()
    done = distloop(
        "launch", str(_project(hosts, tmp_path)), "--out", str(tmp_path / "run"),
        "--ssh-config", str(config), "--remote-dir", str(tmp_path / "remote"),
        timeout_s=120,
    )  # fmt: skip
    assert done.returncode == 1
    assert "Permission denied" in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 60


@pytest.mark.sshd
def test_preflight_passes_then_names_a_dropped_port_as_the_pair_that_fails(
    hosts: SshHosts, tmp_path: Path
) -> None:
    project = _project(hosts, tmp_path)
    check = ["preflight", str(project), "--ssh-config", str(hosts.ssh_config),
             "--remote-command", f"{sys.executable} -m distloop.gui.launcher"]  # fmt: skip
    ready = distloop(*check, timeout_s=180)
    assert ready.returncode == 0, ready.stderr[-3000:]
    assert "preflight: 2 host(s), 2 task(s) ready" in ready.stderr

    if shutil.which("iptables") is None:
        pytest.skip("iptables is not installed")
    rule = ["INPUT", "-p", "tcp", "--dport", "2222", "-j", "DROP"]
    firewall = ["ip", "netns", "exec", hosts.namespaces[1], "iptables"]
    subprocess.run([*firewall, "-A", *rule], check=True, timeout=30)
    try:
        found = distloop(*check, timeout_s=180)
    finally:
        subprocess.run([*firewall, "-D", *rule], timeout=30)
    assert found.returncode == 1
    lines = [line for line in found.stderr.splitlines() if "preflight:" in line]
    assert lines == [
        f"distloop: preflight: {hosts.addresses[0]}: tf_config: worker:0 cannot reach worker:1 "
        f"at {hosts.addresses[1]}:2222: timed out (a firewall drops it?); open that port on its "
        "host for this one"
    ], found.stderr[-3000:]


@pytest.mark.sshd
@pytest.mark.slow
def test_preflight_names_a_host_whose_tensorflow_is_another_version(
    hosts: SshHosts, tmp_path: Path
) -> None:
    """Host 1 runs Distloop from a second environment (launch.hosts' command) whose
    installed TensorFlow says another version: one finding, that host's, that field.

    The version is what pip recorded (the installed package's metadata, read without
    starting TensorFlow); this machine holds one TensorFlow release only, so the second
    environment's own site-packages carries a copy of its record with another version,
    which its interpreter finds before the shared one. The other host's environment is
    the ordinary one, so a probe that read anything but its own host's would not find it.
    """
    real = importlib.metadata.distribution("tensorflow")
    other = "2.20.0" if real.version != "2.20.0" else "2.19.0"
    venv = tmp_path / "other-tf"
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        timeout=120,
    )
    (site,) = venv.glob("lib/python*/site-packages")
    record = site / f"tensorflow-{other}.dist-info"
    installed = Path(str(real.locate_file(""))) / f"tensorflow-{real.version}.dist-info"
    shutil.copytree(installed, record)
    metadata = (record / "METADATA").read_text()
    (record / "METADATA").write_text(
        metadata.replace(f"\nVersion: {real.version}\n", f"\nVersion: {other}\n", 1)
    )
    ours = sysconfig.get_paths()["purelib"]  # this checkout, installed editable
    (site / "distloop-checkout.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    path = _project(hosts, tmp_path)
    data = json.loads(path.read_text())
    command = "{} -m distloop.gui.launcher"
    data["launch"] = {
        "hosts": {
            hosts.addresses[0]: {"command": command.format(sys.executable)},
            hosts.addresses[1]: {"command": command.format(venv / "bin" / "python")},
        }
    }
    path.write_text(json.dumps(data))
    done = distloop("preflight", str(path), "--ssh-config", str(hosts.ssh_config), timeout_s=180)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "preflight:" in line]
    assert lines == [
        f"distloop: preflight: {hosts.addresses[1]}: tensorflow: TF {other} here, "
        f"{real.version} on {hosts.addresses[0]}: install the same version on every host"
    ], done.stderr[-2000:]


@pytest.mark.sshd
@pytest.mark.slow
def test_preflight_names_a_host_whose_distloop_hangs_instead_of_waiting_for_it(
    hosts: SshHosts, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host 1's Distloop never starts its port's listener (a hung file system, a site
    wrapper waiting on a lock): the check waited for its first line without end, so the
    check that finds what would hang hung itself."""
    hung = tmp_path / "hung-distloop"
    ours = f"{sys.executable} -m distloop.gui.launcher"
    # What listens reads its input until the check ends it, printing nothing.
    hung.write_text(
        f'#!/bin/sh\ncase "$*" in *--listen*) exec cat >/dev/null;; esac\nexec {ours} "$@"\n'
    )
    hung.chmod(0o755)
    project = load_project_data(json.loads(_project(hosts, tmp_path).read_text()))
    assert project.tf_config is not None
    ways = {
        hosts.addresses[0]: SshHost(command=ours),
        hosts.addresses[1]: SshHost(command=str(hung)),
    }
    monkeypatch.setattr(preflight_module, "LISTEN_START_S", 5.0)
    launch = SshLaunch(run_name="check", ssh_config=hosts.ssh_config, hosts=ways)
    started = time.monotonic()
    try:
        findings = preflight(project, project.tf_config, launch, devices=False)
    finally:
        launch.close()
    assert [str(finding) for finding in findings] == [
        f"{hosts.addresses[1]}: distloop: {hung} started no listener for worker:1 on port 2222 "
        "within 5 s: it hangs there, or starts too slowly"
    ]
    assert time.monotonic() - started < 60


def test_preflight_names_localhost_in_a_cluster_of_hosts(tmp_path: Path) -> None:
    path = tmp_path / "project.json"
    cluster = {"worker": ["localhost:2222", "10.253.255.3:2222"]}
    path.write_text(json.dumps(multi_worker(20, {"cluster": cluster, "task": {"type": "worker"}})))
    done = distloop("preflight", str(path), timeout_s=60)
    assert done.returncode == 1
    assert (
        "distloop: preflight: localhost: tf_config: a loopback name in a cluster of several "
        "hosts: each task would reach itself; write the host's network name or address"
    ) in done.stderr
    (finding,) = preflight(
        load_project_data(json.loads(path.read_text())),
        TFConfig.model_validate({"cluster": cluster, "task": {"type": "worker"}}),
        SshLaunch(run_name="check"),
    )
    assert (finding.host, finding.field) == ("localhost", "tf_config")
    assert finding.what == (
        "a loopback name in a cluster of several hosts: each task would reach itself"
    )
    assert finding.fix == "write the host's network name or address"


def test_a_launch_hosts_entry_for_no_host_of_the_cluster_is_refused(tmp_path: Path) -> None:
    """A host name mistyped in launch.hosts would quietly leave the host reached by its
    TF_CONFIG name: it is one line before anything connects."""
    path = tmp_path / "project.json"
    cluster = {"worker": ["10.253.255.2:2222", "10.253.255.3:2222"]}
    data = multi_worker(20, {"cluster": cluster, "task": {"type": "worker"}})
    data["launch"] = {"hosts": {"10.253.255.4": {"port": 2200}}}
    path.write_text(json.dumps(data))
    done = distloop("launch", str(path), "--out", str(tmp_path / "run"), timeout_s=60)
    assert done.returncode == 1
    assert (
        "launch.hosts.10.253.255.4: 10.253.255.4 is no host of tf_config's cluster "
        "(10.253.255.2, 10.253.255.3)"
    ) in done.stderr, done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.sshd
@pytest.mark.slow
def test_preflight_finds_a_data_file_missing_on_one_host(tmp_path: Path) -> None:
    """Host 1 does not see the data's folder, and its runs folder is on a disk of 1 MiB:
    a finding each, that host's, with the field and the fix."""
    data, remote = tmp_path / "data", tmp_path / "remote"
    data.mkdir()
    remote.mkdir()
    rng = np.random.default_rng(0)
    np.savez(data / "train.npz", x=rng.normal(size=(64, 6)).astype("float32"),
             y=rng.integers(0, 3, size=64))  # fmt: skip
    with ssh_hosts(tmp_path / "hosts", 2, hidden={1: data}, small={1: remote}) as hosts:
        path = _project(hosts, tmp_path)
        project = json.loads(path.read_text())
        project["data"] = {"source": "numpy", "path": str(data / "train.npz"),
                           "global_batch_size": 16}  # fmt: skip
        path.write_text(json.dumps(project))
        done = distloop(
            "preflight", str(path), "--ssh-config", str(hosts.ssh_config),
            "--remote-command", f"{sys.executable} -m distloop.gui.launcher",
            "--remote-dir", str(remote), timeout_s=180,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr[-2000:]
    assert (
        f"distloop: preflight: {hosts.addresses[1]}: data.path: {data / 'train.npz'} is not "
        "there: copy it to this host"
    ) in done.stderr, done.stderr[-2000:]
    assert (
        f"distloop: preflight: {hosts.addresses[1]}: disk: 1.0 MiB free under "
        f"{remote}/preflight, its tasks' run folders need about "
    ) in done.stderr, done.stderr[-2000:]
    assert "MiB: free some space there, or put the runs on another disk" in done.stderr
    findings = [line for line in done.stderr.splitlines() if "preflight:" in line]
    assert not [line for line in findings if hosts.addresses[0] in line], findings


@pytest.mark.sshd
@pytest.mark.slow
def test_a_task_killed_on_its_host_restarts_the_launch_from_its_checkpoint(
    hosts: SshHosts, tmp_path: Path
) -> None:
    """--max-restarts: worker 1's distloop killed on its host mid-run; the launch starts
    every task again on its host from the chief's checkpoint (copied host to host) and
    ends with the uninterrupted run's trace, each step once."""
    steps = 400
    path = _project(hosts, tmp_path, steps=steps)
    data = json.loads(path.read_text())
    data["training"]["checkpoint_every"] = 25
    path.write_text(json.dumps(data))
    out = tmp_path / "run"
    launcher = subprocess.Popen(
        _launch(hosts, path, out, tmp_path / "remote", "--max-restarts", "1", "--quiet"),
        cwd=REPO,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while not (out / "metrics.csv").exists() or len(read_metrics(out)["step"]) < 60:
            assert launcher.poll() is None, launcher.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "the launch never reached step 60"
            time.sleep(0.3)
        killed = hosts.ssh(1, "pkill -9 -f 'launcher run projec[t]-worker-1'")
        assert killed.returncode == 0, killed
        _, err = launcher.communicate(timeout=400)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 0, err[-3000:]
    assert "worker:1 failed: restart 1 of 1, the whole cluster from its last checkpoint" in err, err
    single_data = multi_worker(steps)
    single_data["strategy"] = {"kind": "one_device"}
    single_data["training"]["checkpoint_every"] = 25
    single = run_engine(load_project_data(single_data), None)
    metrics = read_metrics(out)
    assert metrics["step"] == list(range(1, steps + 1))
    np.testing.assert_allclose(np.float32(metrics["loss"]), single["losses"], rtol=1e-5)
    assert read_status(out)["status"] == "finished"
    assert read_status(out / "tasks" / "worker-0")["status"] == "finished"


@pytest.mark.sshd
@pytest.mark.slow
def test_a_parameter_server_launch_trains_across_the_hosts(hosts: SshHosts, tmp_path: Path) -> None:
    """The coordinator and the ps on one host, two workers on the other: the loss falls,
    every server task is stopped once the coordinator is done, and its model comes back."""
    first, second = hosts.addresses
    data = multi_worker(steps=30)
    data["name"] = "ps launch"
    data["strategy"] = {"kind": "parameter_server"}
    data["tf_config"] = {
        "cluster": {
            "chief": [f"{first}:2222"],
            "worker": [f"{second}:2222", f"{second}:2223"],
            "ps": [f"{first}:2223"],
        },
        "task": {"type": "chief", "index": 0},
    }
    path = tmp_path / "project.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "run"
    done = subprocess.run(
        _launch(hosts, path, out, tmp_path / "remote"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    steps, losses = step_lines(done.stdout)
    assert steps == list(range(1, 31))
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    assert read_status(out)["status"] == "finished"
    for task in ("worker-0", "worker-1", "ps-0"):
        status = read_status(tmp_path / "remote" / "run" / "tasks" / task)
        assert status["status"] == "stopped", (task, status)
    assert (out / "tasks" / "chief-0" / "model.keras").is_file()
    assert not [p for space in hosts.namespaces for p in _processes_besides_sshd(space)]


def test_what_a_launch_runs_beyond_distloop_is_said_before_it_runs(tmp_path: Path) -> None:
    """A project's launch.hosts command line and an ssh configuration file come from
    whoever wrote them: the command line says them before ssh runs (here ssh's
    ProxyCommand is `false`, so nothing leaves this machine)."""
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  ProxyCommand false\n")
    cluster = {"worker": ["h1.example:2222", "h2.example:2222"]}
    project = multi_worker(20, {"cluster": cluster, "task": {"type": "worker"}})
    project["launch"] = {"hosts": {"h2.example": {"command": "/opt/venv/bin/distloop"}}}
    path = tmp_path / "project.json"
    path.write_text(json.dumps(project))
    done = distloop("preflight", str(path), "--ssh-config", str(config), timeout_s=60)
    assert done.returncode == 1
    said = done.stderr.splitlines()
    assert said[:2] == [
        f"distloop: ssh reads {config}: a ProxyCommand or LocalCommand there runs here",
        "distloop: h2.example runs: /opt/venv/bin/distloop",
    ]
    loaded = load_project_data(project)
    plain = SshLaunch(run_name="plain", hosts=launch_hosts(loaded))
    assert plain.unusual(loaded) == ["h2.example runs: /opt/venv/bin/distloop"]
    assert SshLaunch(run_name="plain").unusual(loaded) == []
