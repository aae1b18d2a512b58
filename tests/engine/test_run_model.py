"""The Qt-free run model and the one rule that picks a run's engine (no TensorFlow)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from distloop.engine.cluster import LocalCluster
from distloop.engine.cluster_layout import runs_as_cluster
from distloop.engine.config import Project
from distloop.engine.engine_handle import ClusterHandle
from distloop.engine.examples import load_example
from distloop.engine.messages import (
    EvalMetrics,
    GpuUse,
    Log,
    Message,
    Phase,
    Resources,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
    Stopping,
)
from distloop.engine.problems import ProblemsError
from distloop.engine.process import EngineProcess
from distloop.engine.run_events import (
    Evaluated,
    Logged,
    Pruning,
    RunEvent,
    RunFailure,
    RunOutcome,
    Started,
    StatusChanged,
    StepsAdded,
    TasksChanged,
)
from distloop.engine.run_folder import EvalWriter, MetricsWriter, write_status
from distloop.engine.run_handle import open_run
from distloop.engine.run_model import RunModel
from pydantic import BaseModel
from support.distloop_testing import assert_same_trace


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


STARTED = RunStarted(
    strategy="MirroredStrategy",
    strategy_kind="mirrored",
    num_replicas=2,
    devices=["/cpu:0", "/cpu:1"],
    tensorflow_version="2.99",
    total_steps=10,
)
STARTED_SEEN = Started(
    strategy="MirroredStrategy",
    strategy_kind="mirrored",
    num_replicas=2,
    devices=("/cpu:0", "/cpu:1"),
    tensorflow_version="2.99",
    total_steps=10,
)
"""What views are told of :data:`STARTED`."""


def steps(first: int, last: int, *, full: bool = True) -> StepMetrics:
    """Steps ``first``..``last``; ``full``: with per-replica shares and named losses."""
    numbers = list(range(first, last + 1))
    return StepMetrics(
        steps=numbers,
        losses=[1.0 / n for n in numbers],
        elapsed_s=[0.5 * n for n in numbers],
        replica_losses=[[0.25 / n, 0.75 / n] for n in numbers] if full else None,
        named_losses={"loss": [1.0 / n for n in numbers], "g": [2.0 / n for n in numbers]}
        if full
        else None,
    )


def multi_worker() -> Project:
    seed = load_example("seed")
    strategy = seed.strategy.model_copy(update={"kind": "multi_worker_mirrored"})
    return seed.model_copy(update={"strategy": strategy})


def test_applied_messages_make_the_trace_status_and_clock() -> None:
    clock = Clock()
    model = RunModel(total_steps=None, clock=clock)
    seen: list[RunEvent] = []
    model.subscribe(seen.append)
    assert model.status == "starting" and model.elapsed_s() is None  # start-up is not training
    model.apply(Log(text="engine starting"))
    model.apply(STARTED)
    assert (model.status, model.total_steps, model.started) == ("running", 10, STARTED_SEEN)
    model.apply(steps(1, 2, full=False))
    model.apply(steps(3, 4))
    clock.now += 1.0
    trace = model.trace
    assert list(trace.steps) == [1, 2, 3, 4] and list(trace.losses) == [1.0, 0.5, 1 / 3, 0.25]
    shares = trace.replica_losses()
    assert shares is not None and shares.shape == (4, 2)
    assert all(math.isnan(v) for v in shares[0]) and list(shares[3]) == [0.25 / 4, 0.75 / 4]
    # "loss" is the loss itself; a name first reported late is NaN before it
    assert list(trace.named_losses) == ["g"]
    assert all(math.isnan(v) for v in trace.named_losses["g"][:2])
    assert list(trace.named_losses["g"][2:]) == [2 / 3, 0.5]
    assert model.rate() == pytest.approx(2.0)  # 3 steps in 1.5 s of the engine's clock
    assert model.eta_s() == pytest.approx(3.0)  # 6 steps left
    assert model.elapsed_s() == pytest.approx(3.0)  # 2.0 reported, 1 s since
    assert model.progress() == (4, 10)
    model.apply(EvalMetrics(step=4, metrics={"val_loss": 0.3}, examples=8))
    model.stopping()
    assert model.status == "stopping"
    model.apply(RunFinished(status="stopped", last_step=4, final_loss=0.25, elapsed_s=2.5))
    clock.now += 60
    assert (model.status, model.live, model.eta_s()) == ("stopped", False, None)
    assert model.elapsed_s() == 2.5  # the engine's final word, not the wall clock
    assert trace.evaluations == [(4, {"val_loss": 0.3})]
    assert seen[-1] == StatusChanged("stopped", model.outcome)
    assert StatusChanged("stopping") in seen and len(seen) == 7


def test_each_change_is_told_as_its_typed_event() -> None:
    """Views match on these events, never on the engine's messages (issue 23)."""
    model = RunModel(total_steps=10)
    seen: list[RunEvent] = []
    model.subscribe(seen.append)
    line = Log(level="warning", text="slow disk")
    batch = steps(1, 2)
    evaluation = EvalMetrics(step=2, metrics={"val_loss": 0.3}, examples=8)
    model.apply(line)
    model.apply(STARTED)
    model.apply(StepMetrics(steps=[], losses=[], elapsed_s=[]))  # nothing changed: no event
    model.apply(batch)
    model.apply(evaluation)
    model.set_tasks([])
    model.prune(2, "worse than the median")
    model.stopping()
    failure = RunFailed(error_type="OSError", message="disk full")
    model.apply(failure)
    model.stopping()  # too late: it has ended
    model.resume()
    assert seen == [
        Logged("slow disk", "warning"),
        STARTED_SEEN,
        StepsAdded(
            (1, 2), (1.0, 0.5), (0.5, 1.0), {"loss": (1.0, 0.5), "g": (2.0, 1.0)}
        ),  # the batch
        Evaluated(2, {"val_loss": 0.3}, 8),
        TasksChanged(()),
        Pruning(2, "worse than the median"),
        StatusChanged("stopping"),
        StatusChanged(
            "failed", RunOutcome("failed", None, failure=RunFailure("OSError", "disk full"))
        ),
        StatusChanged("starting"),
    ]


def _wire_in(value: Any) -> list[BaseModel]:
    """The protocol messages (or their parts) anywhere inside ``value``."""
    if isinstance(value, BaseModel):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [m for f in dataclasses.fields(value) for m in _wire_in(getattr(value, f.name))]
    if isinstance(value, Mapping):
        return [m for item in value.items() for m in _wire_in(item)]
    if isinstance(value, tuple | list):
        return [m for item in value for m in _wire_in(item)]
    return []


def test_views_are_told_plain_values_never_the_wire() -> None:
    """Every kind of message a run sends reaches the views as frozen values (issue 35):
    a view that never sees a message need not know the protocol."""
    model = RunModel(total_steps=10)
    seen: list[RunEvent] = []
    model.subscribe(seen.append)
    gpu = GpuUse(index=0, utilization_percent=5, memory_used_bytes=1, memory_total_bytes=2)
    for message in [
        Log(level="warning", text="slow disk", task="worker:1"),
        Phase(name="checking 4 files", done=1, total=4),
        STARTED,
        steps(1, 4),
        EvalMetrics(step=4, metrics={"val_loss": 0.3}, examples=8),
        Resources(time=1, interval_s=1, step=4, cpu_percent=90, rss_bytes=1 << 20, gpus=[gpu]),
        Stopping(last_step=4, saving=["the checkpoint"]),
        RunFailed(error_type="OSError", message="disk full", traceback="Traceback", known=True),
    ]:
        model.apply(message)
    assert {type(event).__name__ for event in seen} >= {
        "Logged", "PhaseChanged", "Started", "StepsAdded", "Evaluated", "ResourcesSampled",
        "SteppingStopped", "StatusChanged",
    }  # fmt: skip
    assert [m for event in seen for m in _wire_in(event)] == []
    assert all(dataclasses.is_dataclass(event) for event in seen)
    assert _wire_in((model.started, model.outcome, model.last_evaluation)) == []


def test_a_failure_keeps_the_training_time_and_names_the_status() -> None:
    clock = Clock()
    model = RunModel(clock=clock)
    model.apply(STARTED)
    model.apply(steps(1, 2))
    clock.now += 2
    model.apply(RunFailed(error_type="EngineDied", message="killed"))
    clock.now += 50
    # it trained until its last step (1.0 s on the engine's clock): the rest was no training
    assert model.status == "failed" and model.elapsed_s() == 1.0
    model.stopping()  # too late: the run has ended
    assert model.status == "failed"


def test_after_the_last_step_the_clock_stands_still_until_the_end_arrives() -> None:
    """Saving the last checkpoint and model is not training: the clock does not run on
    (and then jump back to the engine's figure), nor does an ETA of 0 s stay up."""
    clock = Clock()
    model = RunModel(clock=clock)
    model.apply(STARTED)
    model.apply(steps(1, 9))
    assert not model.finishing
    model.apply(steps(10, 10))
    clock.now += 5  # the engine saves its checkpoint and model.keras
    assert model.finishing and model.status == "running"
    assert model.elapsed_s() == 5.0 and model.eta_s() is None
    model.apply(RunFinished(status="finished", last_step=10, final_loss=0.1, elapsed_s=5.0))
    assert not model.finishing and model.elapsed_s() == 5.0


def write_like_the_engine(run_dir: Path, messages: list[Message]) -> None:
    """The run folder the engine writes for ``messages``, with the engine's own writers."""
    run_dir.mkdir(parents=True)
    (run_dir / "project.json").write_text(json.dumps({"name": "m", "strategy": {}}))
    write_status(run_dir, "running", started_at=1.0, name="model run")
    metrics = MetricsWriter(run_dir / "metrics.csv", 2, named=["loss", "g"])
    evaluations = EvalWriter(run_dir / "eval.csv", ["val_loss", "val_accuracy"])
    for message in messages:
        if isinstance(message, StepMetrics):
            metrics.write(
                message.steps,
                message.losses,
                message.elapsed_s,
                message.replica_losses,
                message.named_losses,
            )
        elif isinstance(message, EvalMetrics):
            evaluations.write(message.step, message.metrics)
        elif isinstance(message, RunFinished):
            write_status(run_dir, message.status, last_step=message.last_step)
    metrics.close()
    evaluations.close()


def test_a_past_run_loads_as_the_same_run_and_resumes_from_it(tmp_path: Path) -> None:
    messages: list[Message] = [
        STARTED,
        steps(1, 3),
        EvalMetrics(step=3, metrics={"val_loss": 0.4, "val_accuracy": 0.5}, examples=8),
        steps(4, 6),
        EvalMetrics(step=6, metrics={"val_loss": 0.3, "val_accuracy": 0.75}, examples=8),
        RunFinished(status="stopped", last_step=6, final_loss=1 / 6, elapsed_s=3.0),
    ]
    live = RunModel()
    for message in messages:
        live.apply(message)
    write_like_the_engine(tmp_path / "run", messages)
    clock = Clock()
    loaded = RunModel.from_folder(tmp_path / "run", clock)
    assert_same_trace(live, loaded)
    assert (loaded.name, loaded.status, loaded.live) == ("model run", "stopped", False)
    clock.now += 10
    assert loaded.elapsed_s() == 3.0  # metrics.csv's clock, standing still
    # Resumed from the checkpoint at step 4: what comes after it is trained again.
    loaded.resume()
    assert loaded.status == "starting" and loaded.live and loaded.elapsed_s() is None
    loaded.apply(STARTED.model_copy(update={"first_step": 5}))
    assert list(loaded.trace.steps) == [1, 2, 3, 4]
    assert loaded.trace.replica_losses().shape == (4, 2)
    assert loaded.progress() == (4, 10)  # as far as its checkpoint, of the whole run
    loaded.apply(steps(5, 5))
    clock.now += 1.5
    assert loaded.elapsed_s() == pytest.approx(4.0)  # the engine's 2.5 s, ticking on
    assert loaded.progress() == (5, 10)
    assert loaded.trace.evaluations == [(3, {"val_loss": 0.4, "val_accuracy": 0.5})]
    with pytest.raises(OSError):
        RunModel.from_folder(tmp_path / "nothing")


def test_open_run_chooses_one_process_or_a_local_cluster(tmp_path: Path) -> None:
    seed, cluster = load_example("seed"), multi_worker()
    assert not runs_as_cluster(seed) and runs_as_cluster(cluster)
    single = open_run(seed, tmp_path / "a")
    assert isinstance(single, EngineProcess) and not isinstance(single, ClusterHandle)
    made = open_run(cluster, tmp_path / "b", workers=3)
    assert isinstance(made, LocalCluster) and isinstance(made, ClusterHandle)
    assert [task.name for task in made.tasks()] == ["worker:0", "worker:1", "worker:2"]
    # distloop run: one task of a cluster that runs elsewhere; distloop cluster: all here
    assert isinstance(open_run(cluster, tmp_path / "c", layout="single"), EngineProcess)
    with pytest.raises(ProblemsError, match="not mirrored"):
        open_run(seed, tmp_path / "d", layout="cluster")
    # a resume takes the same road, and refuses what cannot resume
    resumed = open_run(cluster, tmp_path / "b", resume=True)
    assert isinstance(resumed, LocalCluster)
    ps = cluster.model_copy(
        update={"strategy": cluster.strategy.model_copy(update={"kind": "parameter_server"})}
    )
    with pytest.raises(ProblemsError, match="cannot resume"):
        open_run(ps, tmp_path / "e", resume=True)
    # stand-ins get the same choice and the same arguments
    calls: list[tuple[str, bool]] = []

    def engines(project: Project, run_dir: Path, *, resume: bool = False) -> EngineProcess:
        calls.append(("engine", resume))
        return single

    def clusters(project: Project, run_dir: Path, *, resume: bool = False) -> LocalCluster:
        calls.append(("cluster", resume))
        return made

    for project in (seed, cluster):
        open_run(project, tmp_path, resume=True, engine_factory=engines, cluster_factory=clusters)
    assert calls == [("engine", True), ("cluster", True)]
    assert not any(task.pid for task in made.tasks())  # nothing was started
