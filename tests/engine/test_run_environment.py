"""Every run records what made it (``environment.json``), and a cluster names a task whose
software is not the chief's."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.messages import Log, RunFinished
from distloop.engine.process import EngineProcess, WarmEngine
from distloop.engine.project_file import load_project_data
from distloop.engine.run_environment import (
    DIFF_LIMIT_BYTES,
    behaviour_variables,
    environment_differences,
    git_state,
    package_name,
    software_changes,
)
from distloop.engine.run_folder import read_environment
from support.clusters import multi_worker
from support.distloop_testing import CLI, GUIDE_STEP, REPO, distloop, example_data, run_engine
from support.ssh_hosts import ssh_hosts

SECRETS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-never-recorded",
    "TF_VAR_db_password": "terraform-secret-never-recorded",
    "TF_TOKEN_app_terraform_io": "terraform-token-never-recorded",
    "TF_SERVICE_KEY": "a-key-never-recorded",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, timeout=60
    ).stdout.strip()


def _repository(tmp_path: Path) -> tuple[Path, Path, str]:
    """A project and its custom step code in a git repository of their own, committed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    code = repo / "step.py"
    code.write_text(GUIDE_STEP.replace("RESULT", "loss"))
    data = example_data("seed")
    data["training"] = {"steps": 5, "seed": 41}
    data["custom_code"] = {"path": "step.py"}
    project = repo / "project.json"
    project.write_text(json.dumps(data))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "the project")
    return project, code, _git(repo, "rev-parse", "HEAD")


def test_a_run_records_versions_packages_seed_variables_and_git_without_secrets(
    tmp_path: Path,
) -> None:
    project, code, commit = _repository(tmp_path)
    code.write_text(code.read_text() + "# tried a smaller learning rate\n")
    env = {
        **os.environ,
        **SECRETS,
        "TF_ENABLE_ONEDNN_OPTS": "0",
        "OMP_NUM_THREADS": "2",
    }
    env.pop("TF_CONFIG", None)
    out = tmp_path / "run"
    done = distloop("run", str(project), "--out", str(out), "--quiet", env=env)
    assert done.returncode == 0, done.stderr[-2000:]

    text = (out / "environment.json").read_text()
    record = json.loads(text)
    version = importlib.metadata.version
    assert record["versions"] == {
        "python": platform.python_version(),
        "tensorflow": version("tensorflow"),
        "keras": version("keras"),
        "numpy": version("numpy"),
        "distloop": version("distloop"),
    }
    installed = {
        package_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
    }
    assert record["packages"] == installed
    assert record["seed"] == 41
    assert record["task"] is None
    assert record["platform"]["machine"] == platform.machine()
    assert record["platform"]["cpu"]
    assert record["variables"]["TF_ENABLE_ONEDNN_OPTS"] == "0"
    assert record["variables"]["OMP_NUM_THREADS"] == "2"
    assert "TF_CONFIG" not in record["variables"]
    for name, secret in SECRETS.items():
        assert name not in text and secret not in text
    git = record["git"]
    assert (git["commit"], git["dirty"], git["code_tracked"]) == (commit, True, True)
    assert git["repository"] == str(project.parent)
    assert "+# tried a smaller learning rate" in git["code_diff"]
    assert git["code_diff_truncated"] is False
    assert read_environment(out) == record


def test_the_code_diff_is_capped_and_a_folder_outside_git_records_none(tmp_path: Path) -> None:
    _project, code, commit = _repository(tmp_path)
    code.write_text(code.read_text() + "#" * (2 * DIFF_LIMIT_BYTES) + "\n")
    state = git_state(code.parent, code)
    assert state is not None
    assert (state["commit"], state["dirty"], state["code_diff_truncated"]) == (commit, True, True)
    assert len(state["code_diff"].encode()) == DIFF_LIMIT_BYTES
    outside = tmp_path / "plain"
    outside.mkdir()
    assert git_state(outside, None) is None


def test_only_the_listed_variables_are_taken_never_a_secret() -> None:
    taken = behaviour_variables(
        {
            **SECRETS,
            "CUDA_VISIBLE_DEVICES": "0,1",
            "XLA_FLAGS": "--xla_gpu_autotune_level=0",
            "TF_CONFIG": "{}",
            "HOME": "/root",
            "NCCL_DEBUG": "INFO",
        }
    )
    assert taken == {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NCCL_DEBUG": "INFO",
        "XLA_FLAGS": "--xla_gpu_autotune_level=0",
    }


def test_a_crafted_record_is_compared_as_text_never_walked_deep() -> None:
    deep = json.loads('{"d":' * 900 + "0" + "}" * 900)  # about as deep as a run folder's
    crafted = json.loads(json.dumps({"packages": "not a mapping", "gpus": [1, {"a": None}]}))
    crafted["seed"] = {"x": {"y": {"z": {"w": [1]}}}}
    plain = {"packages": {"numpy": "2.0"}, "seed": 0, "gpus": None}
    differences = environment_differences([crafted, plain, {"deep": deep}])
    assert differences["packages"] == ["not a mapping", None, None]
    assert differences["packages.numpy"] == [None, "2.0", None]
    assert differences["gpus"] == ['[1, {"a": null}]', "", None]
    assert differences["seed.x.y.z"] == ['{"w": [1]}', None, None]
    assert differences["seed"] == [None, "0", None]
    assert differences["deep.d.d.d"][2] in ("(nested too deeply)", json.dumps(deep["d"]["d"]["d"]))


def test_differences_name_changed_added_and_removed_packages() -> None:
    chief = {"task": "chief:0", "versions": {"python": "3.11.7"}, "packages": {"a": "1", "b": "2"}}
    worker = {"task": "worker:0", "versions": {"python": "3.11.7"}, "packages": {"a": "1.1"}}
    worker["packages"]["c"] = "3"
    assert environment_differences([chief, worker]) == {
        "packages.a": ["1", "1.1"],
        "packages.b": ["2", None],
        "packages.c": [None, "3"],
    }
    assert software_changes(worker["packages"], chief["packages"], "chief:0") == [
        "a 1.1 (chief:0: 1)",
        "b none (chief:0: 2)",
        "c 3 (chief:0: none)",
    ]


SKEWED = "distloop-skew-probe"


def fake_package(folder: Path, name: str = SKEWED, version: str = "1.0") -> Path:
    """A folder holding nothing but an installed package's record: a package installed on
    one machine (or in one environment) and not on another."""
    record = folder / f"{name.replace('-', '_')}-{version}.dist-info"
    record.mkdir(parents=True)
    (record / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    return folder


@contextmanager
def skewed_start(task: str, site: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``task``'s engine starts with ``site`` on its path and XLA_FLAGS set, the others as
    this process is: a local cluster's tasks share one machine, so the test gives one of
    them what another host would have (a spawned engine takes the parent's ``sys.path``
    and environment as they are when it starts)."""
    start = EngineProcess.start

    def start_skewed(engine: EngineProcess) -> None:
        if engine.task != task:
            start(engine)
            return
        with monkeypatch.context() as patch:
            patch.syspath_prepend(str(site))
            patch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=false")
            start(engine)

    monkeypatch.setattr(EngineProcess, "start", start_skewed)
    yield


@pytest.mark.slow
def test_a_local_cluster_names_the_task_whose_packages_and_variables_differ(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """worker:1 has a package worker:0 has not, and XLA_FLAGS set: the launcher names it,
    with both, before the first step (the run itself goes on: a package may be harmless)."""
    site = fake_package(tmp_path / "site")
    out = tmp_path / "run"
    with skewed_start("worker:1", site, monkeypatch):
        cluster = LocalCluster(load_project_data(multi_worker(steps=3)), out, workers=2)
        cluster.start()
    messages = []
    try:
        deadline = time.monotonic() + 240
        while not cluster.done:
            assert time.monotonic() < deadline, "the cluster run timed out"
            messages += cluster.poll(0.2)
    finally:
        cluster.close()
    assert isinstance(messages[-1], RunFinished), messages[-1]
    warnings = [m for m in messages if isinstance(m, Log) and "environment differs" in m.text]
    assert [(m.task, m.level, m.text) for m in warnings] == [
        (
            "worker:1",
            "warning",
            f"worker:1's environment differs from worker:0's: {SKEWED} 1.0 (worker:0: none); "
            "XLA_FLAGS=--xla_cpu_enable_fast_math=false (worker:0: none) "
            "(each task's environment.json has it whole)",
        )
    ]
    first_step = next(i for i, m in enumerate(messages) if type(m).__name__ == "StepMetrics")
    assert messages.index(warnings[0]) < first_step
    skewed = read_environment(out / "tasks" / "worker-1")
    chief = read_environment(out / "tasks" / "worker-0")
    assert (skewed["task"], chief["task"]) == ("worker:1", "worker:0")
    assert skewed["packages"][SKEWED] == "1.0" and SKEWED not in chief["packages"]
    assert read_environment(out) == chief  # the cluster's folder: its chief's


@pytest.mark.slow
def test_a_local_cluster_of_one_software_says_so(tmp_path: Path) -> None:
    project = tmp_path / "cluster.json"
    project.write_text(json.dumps(multi_worker(steps=3)))
    done = distloop("cluster", str(project), "--workers", "2", "--out", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr[-2000:]
    digest = read_environment(tmp_path / "run")["digest"]
    log = (tmp_path / "run" / "engine.log").read_text()
    assert f"every task runs the same software (environment {digest})" in log
    assert "environment differs" not in log + done.stderr


@pytest.mark.sshd
@pytest.mark.slow
def test_preflight_and_launch_name_the_host_and_task_whose_packages_differ(
    tmp_path: Path,
) -> None:
    """Host 1 runs Distloop with a folder first on its path recording six 0.0.1 (a package
    TensorFlow needs) and an extra package nothing needs. The pre-flight names that host and
    six alone, and refuses the launch; launched without it, the run names worker:1 with both
    as it starts, and trains all the same."""
    site = fake_package(fake_package(tmp_path / "site"), "six", "0.0.1")
    six = importlib.metadata.version("six")
    command = f"{sys.executable} -m distloop.gui.launcher"
    with ssh_hosts(tmp_path / "hosts", 2) as hosts:
        first, second = hosts.addresses
        path = tmp_path / "project.json"
        data = multi_worker(
            3,
            {
                "cluster": {"worker": [f"{first}:2222", f"{second}:2222"]},
                "task": {"type": "worker"},
            },
        )
        data["launch"] = {
            "hosts": {
                first: {"command": command, "remote_dir": str(tmp_path / "a")},
                second: {"command": f"env PYTHONPATH={site} {command}",
                         "remote_dir": str(tmp_path / "b")},
            }
        }  # fmt: skip
        path.write_text(json.dumps(data))
        launch = [*CLI, "launch", str(path), "--out", str(tmp_path / "run")]
        launch += ["--ssh-config", str(hosts.ssh_config)]
        refused = subprocess.run(launch, cwd=REPO, capture_output=True, text=True, timeout=300)
        launched = subprocess.run(
            [*launch, "--no-preflight"], cwd=REPO, capture_output=True, text=True, timeout=300
        )
    assert refused.returncode == 1, refused.stderr[-3000:]
    assert [line for line in refused.stderr.splitlines() if "preflight:" in line] == [
        f"distloop: preflight: {second}: packages: six 0.0.1 ({first}: {six}): "
        "install the same versions on every host"
    ], refused.stderr[-3000:]
    assert launched.returncode == 0, launched.stderr[-3000:]
    assert (
        f"worker:1's environment differs from worker:0's: {SKEWED} 1.0 (worker:0: none); "
        f"six 0.0.1 (worker:0: {six}) (each task's environment.json has it whole)"
    ) in launched.stderr
    remote = read_environment(tmp_path / "b" / "run" / "tasks" / "worker-1")
    assert (remote["task"], remote["packages"]["six"]) == ("worker:1", "0.0.1")


def test_a_warm_engine_records_the_environment_it_read_before_its_run(tmp_path: Path) -> None:
    """The window's warm engine reads the packages while it waits for its run: the record
    is the same as a cold engine's."""
    warm = WarmEngine()
    project = load_project_data({**example_data("seed"), "training": {"steps": 3, "seed": 9}})
    ran = run_engine(project, tmp_path / "run", warm=warm)
    assert isinstance(ran["terminal"], RunFinished), ran["terminal"]
    record = read_environment(tmp_path / "run")
    assert record["seed"] == 9
    assert record["versions"]["tensorflow"] == importlib.metadata.version("tensorflow")
    assert record["packages"] == {
        package_name(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
    }


def test_preflight_compares_packages_only_where_both_hosts_sent_them() -> None:
    """A host running a Distloop from before this comparison sends no packages: its
    Distloop version is the one finding, not every package the other host has."""
    from distloop.engine.cluster.preflight import _compare

    project = load_project_data(multi_worker())
    versions = {"distloop": "0.1.0", "python": "3.11.7", "tensorflow": "2.21.0"}
    first = {**versions, "packages": {"numpy": "2.0", "tensorflow": "2.21.0"}}
    second = {**versions, "packages": {"numpy": "2.1", "tensorflow": "2.21.0"}}
    older = {**versions, "distloop": "0.0.9"}
    found = _compare({"a": first, "b": second}, project, {})
    assert [str(f) for f in found] == [
        "b: packages: numpy 2.1 (a: 2.0): install the same versions on every host"
    ]
    found = _compare({"a": first, "c": older}, project, {})
    assert [f.field for f in found] == ["distloop"]
