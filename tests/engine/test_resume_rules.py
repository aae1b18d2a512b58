"""Which command continues a run folder, decided once (engine.resume_rules), as each
command and the window meet it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from distloop.engine.examples import load_example
from distloop.engine.problems import ProblemsError
from distloop.engine.resume_rules import (
    Layout,
    ResumableRun,
    command_refusal,
    refuse_strategy,
    resumable_run,
    window_refusal,
)
from distloop.engine.run_folder import PROJECT_FILE, STATUS_FILE, TASKS_DIR
from support.distloop_testing import distloop


def run_folder(
    root: Path, kind: str = "mirrored", *, tasks: bool = False, launch: bool = False
) -> Path:
    seed = load_example("seed")
    project = seed.model_copy(update={"strategy": seed.strategy.model_copy(update={"kind": kind})})
    root.mkdir()
    (root / PROJECT_FILE).write_text(project.to_json(), encoding="utf-8")
    status = (
        {"status": "stopped", "launch": {"run_name": root.name}}
        if launch
        else {"status": "stopped"}
    )
    (root / STATUS_FILE).write_text(json.dumps(status), encoding="utf-8")
    if tasks:
        (root / TASKS_DIR).mkdir()
    return root


def test_each_folder_names_the_command_that_continues_it(tmp_path: Path) -> None:
    single = resumable_run(run_folder(tmp_path / "single"))
    cluster = resumable_run(run_folder(tmp_path / "cluster", "multi_worker_mirrored", tasks=True))
    launch = resumable_run(
        run_folder(tmp_path / "launch", "multi_worker_mirrored", tasks=True, launch=True)
    )
    assert [run.layout for run in (single, cluster, launch)] == list(Layout)
    assert launch.launch is not None and launch.launch.run_name == "launch"
    assert command_refusal(single, Layout.RUN) is None
    assert command_refusal(cluster, Layout.RUN) == (
        f"{cluster.run_dir} holds a local cluster's run: "
        f"use distloop cluster --resume {cluster.run_dir}"
    )
    assert command_refusal(launch, Layout.CLUSTER) == (
        f"{launch.run_dir} holds a run launched on its hosts over SSH: "
        f"use distloop launch --resume {launch.run_dir}"
    )
    assert window_refusal(single) is None and window_refusal(cluster) is None
    assert window_refusal(launch) is None  # on its hosts


def test_a_strategy_that_cannot_resume_is_refused_by_every_command(tmp_path: Path) -> None:
    seed = load_example("seed")
    strategy = seed.strategy.model_copy(update={"kind": "parameter_server"})
    servers = ResumableRun(tmp_path, seed.model_copy(update={"strategy": strategy}), Layout.CLUSTER)
    for layout in Layout:
        assert "cannot resume" in (command_refusal(servers, layout) or "")
    assert "cannot resume" in (window_refusal(servers) or "")
    with pytest.raises(ProblemsError, match="cannot resume"):
        refuse_strategy(servers.project)


@pytest.mark.parametrize(
    ("command", "folder", "says", "exit_code"),
    [
        ("run", "cluster", "use distloop cluster --resume", 2),
        ("cluster", "single", "use distloop run --resume", 2),
        ("cluster", "launch", "use distloop launch --resume", 2),
        ("launch", "cluster", "use distloop cluster --resume", 2),
        ("run", "none", "is not a run folder (it has no project.json)", 1),
    ],
)
def test_the_wrong_resume_command_names_the_right_one(
    tmp_path: Path, command: str, folder: str, says: str, exit_code: int
) -> None:
    """Another command's folder is a usage error (2, as the README says); no run is 1."""
    made = {
        "single": lambda: run_folder(tmp_path / "single"),
        "cluster": lambda: run_folder(tmp_path / "cluster", "multi_worker_mirrored", tasks=True),
        "launch": lambda: run_folder(
            tmp_path / "launch", "multi_worker_mirrored", tasks=True, launch=True
        ),
        "none": lambda: tmp_path,
    }[folder]()
    result = distloop(command, "--resume", str(made))
    assert result.returncode == exit_code, result.stderr
    assert says in result.stderr and "Traceback" not in result.stderr
