"""MLflow: one job is one MLflow run, read back with MLflow's own client from a real store
the test makes (an SQLite file, or a real ``mlflow server`` on 127.0.0.1 for live logging).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distloop.engine.mlflow_log import flat_params
from distloop.engine.mlflow_log.records import MAX_PARAM_VALUE
from distloop.engine.mlflow_log.tracking import METRICS_PER_BATCH
from distloop.engine.run_folder import METRICS_FILE, PROJECT_FILE, load_json, read_metrics
from support.distloop_testing import REPO, distloop, synthetic_project
from support.slurm_jobs import chief_started, fake_job
from support.study_folders import swept_study

mlflow = pytest.importorskip("mlflow")
from mlflow.tracking import MlflowClient  # noqa: E402


@pytest.fixture(autouse=True)
def in_tmp_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """MLflow keeps a SQLite store's artifacts in ``./mlruns``: the test's folder, never the
    checkout."""
    monkeypatch.chdir(tmp_path)


def distloop_here(*args: str, **kwargs: Any) -> subprocess.CompletedProcess:
    """``distloop`` run from the current folder (the test's)."""
    return distloop(*args, cwd=Path.cwd(), **kwargs)


def sqlite_uri(folder: Path) -> str:
    return f"sqlite:///{folder / 'mlflow.db'}"


def only_run(uri: str, experiment: str = "Distloop") -> mlflow.entities.Run:
    client = MlflowClient(uri)
    found = client.get_experiment_by_name(experiment)
    assert found is not None
    runs = client.search_runs([found.experiment_id])
    assert len(runs) == 1, [run.info.run_name for run in runs]
    return runs[0]


def folder_digest(folder: Path) -> dict[str, str]:
    """Every file under ``folder`` by its content and mode: what "untouched" compares."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.is_symlink():
            info = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            found[str(path.relative_to(folder))] = f"{digest} {info.st_mode} {info.st_mtime_ns}"
    return found


def history_steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(metric.step for metric in client.get_metric_history(run_id, key))


def cluster_project(steps: int = 24) -> dict:
    data = synthetic_project(1, steps=steps)
    data["name"] = "mlflow cluster"
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["evaluation"] = {"every": 8, "split": 0.25}
    return data


# --- a finished folder ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)  # TensorFlow starts and a new MLflow store: minutes on a busy machine
def test_a_local_two_worker_cluster_is_one_mlflow_run_with_every_step(tmp_path) -> None:
    """A real ``distloop cluster`` of two workers, logged afterwards: one run, each step's
    loss and each evaluation at its step, params equal to the project's, each task's
    system metrics and environment, the model and the project as artifacts."""
    project = tmp_path / "project.json"
    project.write_text(json.dumps(cluster_project()))
    out = tmp_path / "run"
    trained = distloop_here("cluster", str(project), "--workers", "2", "--out", str(out), "--quiet")
    assert trained.returncode == 0, trained.stderr[-3000:]
    for task in ("worker-0", "worker-1"):  # as the system-metrics recorder writes them
        (out / "tasks" / task / "system_metrics.csv").write_text(
            "step,time,cpu_percent,memory_mb\n1,1700000000.5,50.5,100\n2,1700000001.5,60,101\n"
        )
        (out / "tasks" / task / "environment.json").write_text(
            json.dumps({"python": "3.11.9", "versions": {"tensorflow": "2.21.0"}, "task": task})
        )
    before = folder_digest(out)
    uri = sqlite_uri(tmp_path)

    logged = distloop_here("mlflow", str(out), "--tracking-uri", uri)

    assert logged.returncode == 0, logged.stderr[-3000:]
    assert "Traceback" not in logged.stderr
    run = only_run(uri)
    client = MlflowClient(uri)
    assert history_steps(client, run.info.run_id, "loss") == list(range(1, 25))
    assert history_steps(client, run.info.run_id, "val_loss") == [8, 16, 24]
    assert run.data.params == flat_params(load_json(out / PROJECT_FILE))
    assert run.data.params["strategy.kind"] == "multi_worker_mirrored"
    assert run.info.status == "FINISHED"
    for task in ("worker-0", "worker-1"):
        assert history_steps(client, run.info.run_id, f"system/{task}/cpu_percent") == [1, 2]
    assert run.data.tags["distloop.environment.versions.tensorflow"] == "2.21.0"
    artifacts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"model.keras", "project.json", "environment"} <= artifacts
    environments = {a.path for a in client.list_artifacts(run.info.run_id, "environment")}
    assert environments == {"environment/worker-0", "environment/worker-1"}
    assert folder_digest(out) == before


@pytest.mark.slow
@pytest.mark.timeout(3600)  # a thousand batches into SQLite: 2 minutes, 20 on a busy machine
def test_a_million_steps_all_arrive(tmp_path) -> None:
    """A run of 10^6 steps (its metrics.csv written directly, 20 MB) reaches MLflow whole:
    MLflow takes at most 1,000 metrics a batch, so this is a thousand batches."""
    run = tmp_path / "long run"
    run.mkdir()
    data = synthetic_project(1, steps=1_000_000)
    (run / PROJECT_FILE).write_text(json.dumps(data))
    (run / "status.json").write_text(
        json.dumps({"status": "finished", "started_at": 1.7e9, "updated_at": 1.7e9 + 1e4})
    )
    steps = 1_000_000
    with (run / METRICS_FILE).open("w") as metrics:
        metrics.write("step,loss,elapsed_s\n")
        metrics.writelines(f"{i},{1 / i:.6g},{i * 0.01:.6f}\n" for i in range(1, steps + 1))
    uri = sqlite_uri(tmp_path)

    logged = distloop_here("mlflow", str(run), "--tracking-uri", uri, timeout_s=3400)

    assert logged.returncode == 0, logged.stderr[-3000:]
    assert f"({steps:,} metric values)" in logged.stdout
    run_id = only_run(uri).info.run_id
    # MLflow's get_metric_history reads all 10^6 back as objects (137 s and 612 MB on a
    # busy machine); its store's own table says the same in a second
    with contextlib.closing(sqlite3.connect(tmp_path / "mlflow.db")) as store:
        counted = store.execute(
            "SELECT COUNT(*), COUNT(DISTINCT step), MIN(step), MAX(step) FROM metrics "
            "WHERE run_uuid = ? AND key = 'loss'",
            (run_id,),
        ).fetchone()
    assert counted == (steps, steps, 1, steps) and steps > METRICS_PER_BATCH
    last = MlflowClient(uri).get_run(run_id).data.metrics["loss"]  # the latest step's
    assert last == pytest.approx(1e-6)


def test_a_slurm_job_is_one_run_with_its_chief_s_steps(tmp_path) -> None:
    """A submitted job's run folder records the job; its chief's task folder the trace (as
    the runs list reads it): one MLflow run, named after the job, each task's own records."""
    run_dir = fake_job(tmp_path / "jobs", job_id="42", name="seed")
    chief_started(run_dir, status="finished", task="worker-0")
    chief_started(run_dir, status="finished", task="worker-1")
    (run_dir / "tasks" / "worker-1" / "system_metrics.csv").write_text("cpu_percent\n12.5\n")
    uri = sqlite_uri(tmp_path)

    logged = distloop_here("mlflow", str(run_dir), "--tracking-uri", uri)

    assert logged.returncode == 0, logged.stderr[-3000:]
    run = only_run(uri)
    client = MlflowClient(uri)
    assert run.info.run_name == "seed (Slurm job 42)"
    assert history_steps(client, run.info.run_id, "loss") == [1, 2, 3]
    assert history_steps(client, run.info.run_id, "system/worker-1/cpu_percent") == [0]
    assert run.data.params == flat_params(load_json(run_dir / "tasks/worker-0/project.json"))


def test_long_settings_fit_mlflow_and_names_are_dotted() -> None:
    params = flat_params({"a": {"b": {"c": 1}, "d": [1, 2]}, "text": "x" * 10_000, "e": None})
    assert params == {"a.b.c": "1", "a.d": "[1, 2]", "text": "x" * MAX_PARAM_VALUE, "e": "null"}


@pytest.mark.slow
@pytest.mark.timeout(900)  # TensorFlow starts and a new MLflow store: minutes on a busy machine
def test_a_study_is_a_parent_run_with_a_child_per_trial(tmp_path) -> None:
    # Every trial trains its 30 steps: a pruned one's stop lands where the machine's speed
    # puts it (step 19 in a loaded CI run, after step 30 here).
    study = swept_study(tmp_path / "study", trials=3, pruner="none")
    uri = sqlite_uri(tmp_path)

    logged = distloop_here("mlflow", str(study), "--tracking-uri", uri, "--experiment", "sweeps")

    assert logged.returncode == 0, logged.stderr[-3000:]
    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("sweeps").experiment_id])
    parents = [run for run in runs if "mlflow.parentRunId" not in run.data.tags]
    assert len(parents) == 1 and len(runs) == 4
    parent = parents[0]
    children = [run for run in runs if run is not parent]
    assert {run.data.tags["mlflow.parentRunId"] for run in children} == {parent.info.run_id}
    assert sorted(run.data.tags["distloop.trial"] for run in children) == ["0", "1", "2"]
    for child in children:
        trial = study / "trials" / f"trial-{int(child.data.tags['distloop.trial']):04d}"
        assert child.data.params == flat_params(load_json(trial / PROJECT_FILE))
        assert history_steps(client, child.info.run_id, "loss") == list(range(1, 31))
    assert parent.data.params["settings.trials"] == "3"
    trial_losses = client.get_metric_history(parent.info.run_id, "trial_final_loss")
    assert sorted(metric.step for metric in trial_losses) == [0, 1, 2]


# --- bad input -------------------------------------------------------------------------


def small_run(folder: Path, steps: int = 5) -> Path:
    folder.mkdir()
    (folder / PROJECT_FILE).write_text(json.dumps(synthetic_project(1, steps=steps)))
    (folder / "status.json").write_text(json.dumps({"status": "finished", "started_at": 1.7e9}))
    rows = "".join(f"{i},{1 / i},{i * 0.1:.6f}\n" for i in range(1, steps + 1))
    (folder / METRICS_FILE).write_text("step,loss,elapsed_s\n" + rows)
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_server_is_one_line_and_the_folder_is_untouched(tmp_path) -> None:
    run = small_run(tmp_path / "run")
    before = folder_digest(run)
    uri = f"http://127.0.0.1:{free_port()}"

    logged = distloop_here("mlflow", str(run), "--tracking-uri", uri)

    assert logged.returncode == 1
    assert logged.stderr.strip().splitlines() == [
        f"distloop: MLflow at {uri}: the tracking server does not answer "
        "([Errno 111] Connection refused)"
    ]
    assert folder_digest(run) == before


def test_a_refused_write_is_one_line(tmp_path) -> None:
    """The store refuses the run: its experiment was deleted (MLflow keeps it, inactive)."""
    run = small_run(tmp_path / "run")
    uri = sqlite_uri(tmp_path)
    client = MlflowClient(uri)
    client.delete_experiment(client.create_experiment("archived"))
    before = folder_digest(run)

    logged = distloop_here("mlflow", str(run), "--tracking-uri", uri, "--experiment", "archived")

    assert logged.returncode == 1
    assert len(logged.stderr.strip().splitlines()) == 1, logged.stderr
    assert logged.stderr.startswith(f"distloop: MLflow at {uri}: ")
    assert "active" in logged.stderr
    assert folder_digest(run) == before


def test_a_linked_model_is_never_uploaded_and_a_broken_project_is_one_line(tmp_path) -> None:
    """A run folder may be anyone's: a ``model.keras`` linked to a secret is not sent, and a
    project that does not read is one line before anything is logged."""
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    run = small_run(tmp_path / "run")
    (run / "model.keras").symlink_to(secret)
    uri = sqlite_uri(tmp_path)
    logged = distloop_here("mlflow", str(run), "--tracking-uri", uri)
    assert logged.returncode == 0, logged.stderr[-3000:]
    client = MlflowClient(uri)
    assert [a.path for a in client.list_artifacts(only_run(uri).info.run_id)] == ["project.json"]

    (run / PROJECT_FILE).write_text('{"name": ')
    broken = distloop_here("mlflow", str(run), "--tracking-uri", uri)
    assert broken.returncode == 1
    assert broken.stderr.startswith(f"distloop: {run / PROJECT_FILE}: cannot be read (")
    assert len(broken.stderr.splitlines()) == 1


def test_no_run_folder_is_one_line(tmp_path) -> None:
    logged = distloop_here("mlflow", str(tmp_path), "--tracking-uri", sqlite_uri(tmp_path))
    assert logged.returncode == 1
    assert logged.stderr == f"distloop: {tmp_path}: not a run folder (it has no project.json)\n"


def test_without_mlflow_it_says_how_to_install_it(tmp_path) -> None:
    run = small_run(tmp_path / "run")
    blocked = (
        "import sys; sys.modules['mlflow'] = None; from distloop.engine.cli import main; "
        f"sys.exit(main(['mlflow', {str(run)!r}, '--tracking-uri', {sqlite_uri(tmp_path)!r}]))"
    )
    logged = subprocess.run(
        [sys.executable, "-c", blocked], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert logged.returncode == 1
    assert logged.stderr == "distloop: MLflow is not installed: pip install 'distloop[mlflow]'\n"


def test_distloop_starts_without_importing_mlflow() -> None:
    """MLflow takes a second and more to import: only logging may pay for it."""
    probe = (
        "import sys; from distloop.engine.cli import build_parser; "
        "build_parser().parse_args(['run', 'p.json', '--mlflow-live']); "
        "print('mlflow' in sys.modules)"
    )
    found = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=REPO
    )
    assert found.stdout.strip() == "False", found.stderr


def test_a_worker_alone_may_not_log_live(tmp_path) -> None:
    project = tmp_path / "p.json"
    project.write_text(json.dumps(cluster_project()))
    refused = distloop_here("run", str(project), "--task", "worker:0", "--mlflow-live")
    assert refused.returncode == 2
    assert "logs from the process that follows the whole job" in refused.stderr


# --- live ------------------------------------------------------------------------------


@contextlib.contextmanager
def mlflow_server(folder: Path) -> Iterator[str]:
    """A real ``mlflow server`` on 127.0.0.1, its store in ``folder``; its URI."""
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(
        [
            sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1",
            "--port", str(port), "--workers", "1",
            "--backend-store-uri", sqlite_uri(folder),
            "--artifacts-destination", str(folder / "artifacts"),
        ],
        stdout=log, stderr=subprocess.STDOUT, cwd=folder,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 240
        while True:
            assert server.poll() is None, (folder / "server.log").read_text()[-3000:]
            with contextlib.suppress(Exception):
                MlflowClient(uri).search_experiments()
                break
            assert time.monotonic() < deadline, (folder / "server.log").read_text()[-3000:]
            time.sleep(0.5)
        yield uri
    finally:
        server.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.wait(30)
        if server.poll() is None:
            server.kill()
            server.wait()
        log.close()


@pytest.mark.slow
@pytest.mark.timeout(900)  # TensorFlow starts and a new MLflow store: minutes on a busy machine
def test_live_logging_of_a_real_run_reaches_a_real_server(tmp_path) -> None:
    """``distloop run --mlflow-live``: the steps are in MLflow while the run trains (before
    its end), then every one of them, with the params, the model, and the run's end."""
    (tmp_path / "store").mkdir()
    data = synthetic_project(1, steps=3000)  # seconds of training: batches go meanwhile
    data["evaluation"] = {"every": 1000, "split": 0.25}
    data["name"] = "live"
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    out = tmp_path / "run"
    with mlflow_server(tmp_path / "store") as uri:
        follower = subprocess.Popen(
            [
                sys.executable, "-m", "distloop.gui.launcher", "run", str(project),
                "--out", str(out), "--quiet", "--mlflow-tracking-uri", uri,
                "--mlflow-experiment", "live runs",
            ],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=Path.cwd(),
        )  # fmt: skip
        client = MlflowClient(uri)
        seen_while_training: list[int] = []
        deadline = time.monotonic() + 400
        while follower.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                experiment = client.get_experiment_by_name("live runs")
                runs = client.search_runs([experiment.experiment_id]) if experiment else []
                if runs and runs[0].info.status == "RUNNING":
                    steps = history_steps(client, runs[0].info.run_id, "loss")
                    if steps:
                        seen_while_training.append(len(steps))
            time.sleep(0.5)
        _, stderr = follower.communicate(timeout=400)
        assert follower.returncode == 0, stderr[-3000:]
        assert seen_while_training and min(seen_while_training) < 3000, stderr[-3000:]
        run = only_run(uri, "live runs")
        assert history_steps(client, run.info.run_id, "loss") == list(range(1, 3001))
        assert history_steps(client, run.info.run_id, "val_loss") == [1000, 2000, 3000]
        assert run.data.params == flat_params(load_json(out / PROJECT_FILE))
        assert run.info.status == "FINISHED"
        assert {"model.keras", "project.json"} <= {
            a.path for a in client.list_artifacts(run.info.run_id)
        }
        assert f"MLflow run {run.info.run_id}: " in stderr


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_killed_follower_loses_nothing_mlflow_took(tmp_path) -> None:
    """The follower killed mid-run (SIGKILL: no cleanup at all): every step MLflow had
    taken stays there, in order and equal to the run folder's."""
    (tmp_path / "store").mkdir()
    data = synthetic_project(1, steps=100_000)  # minutes of training: killed long before
    project = tmp_path / "project.json"
    project.write_text(json.dumps(data))
    out = tmp_path / "run"
    with mlflow_server(tmp_path / "store") as uri:
        follower = subprocess.Popen(
            [
                sys.executable, "-m", "distloop.gui.launcher", "run", str(project),
                "--out", str(out), "--quiet", "--mlflow-tracking-uri", uri,
            ],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=Path.cwd(),
        )  # fmt: skip
        client = MlflowClient(uri)
        seen = 0
        deadline = time.monotonic() + 600
        while seen < 2 * METRICS_PER_BATCH:
            assert follower.poll() is None, follower.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            with contextlib.suppress(Exception):
                experiment = client.get_experiment_by_name("Distloop")
                (run,) = client.search_runs([experiment.experiment_id])
                seen = len(history_steps(client, run.info.run_id, "loss"))
            time.sleep(0.5)
        follower.kill()
        follower.communicate(timeout=60)
        steps = client.get_metric_history(run.info.run_id, "loss")
    assert len(steps) >= seen
    assert sorted(metric.step for metric in steps) == list(range(1, len(steps) + 1))
    recorded = read_metrics(out)["loss"]
    by_step = {metric.step: metric.value for metric in steps}
    assert [by_step[step] for step in range(1, len(steps) + 1)] == pytest.approx(
        recorded[: len(steps)], rel=1e-6
    )


@pytest.mark.slow
def test_a_live_store_that_does_not_answer_is_one_line_and_the_run_goes_on(tmp_path) -> None:
    project = tmp_path / "project.json"
    project.write_text(json.dumps(synthetic_project(1, steps=40)))
    out = tmp_path / "run"
    uri = f"http://127.0.0.1:{free_port()}"

    trained = distloop_here("run", str(project), "--out", str(out), "--quiet", "--mlflow-live",
                       "--mlflow-tracking-uri", uri)  # fmt: skip

    assert trained.returncode == 0, trained.stderr[-3000:]
    said = f"distloop: MLflow live logging stopped: MLflow at {uri}: the tracking server does "
    assert trained.stderr.count(said) == 1, trained.stderr
    assert "Traceback" not in trained.stderr
    assert read_metrics(out)["step"] == [float(step) for step in range(1, 41)]
