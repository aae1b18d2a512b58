"""Every run records what made it (``environment.json``), and a cluster names a task whose
software is not the chief's."""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

from distloop.engine.run_environment import (
    DIFF_LIMIT_BYTES,
    behaviour_variables,
    environment_differences,
    git_state,
    package_name,
    software_changes,
)
from distloop.engine.run_folder import read_environment
from distloop_testing import distloop, example_data
from test_custom_code import GUIDE_STEP

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
