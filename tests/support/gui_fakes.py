"""A scripted stand-in for engine.process.EngineProcess (GUI unit tests only)."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from distloop.engine.cluster.slurm_jobs import JobState, SlurmRun
from distloop.engine.config import Project
from distloop.engine.engine_handle import TaskInfo
from distloop.engine.messages import (
    Log,
    Message,
    Resources,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from distloop.engine.prediction import PredictionResult
from distloop.engine.run_events import RunEvent, StepsAdded
from distloop.engine.run_model import RunModel
from distloop.gui.run.run_controller import RunController
from distloop.gui.shell.main_window import MainWindow


def seed_run(steps: int = 20, batch: int = 5) -> list[list[Message]]:
    """The message batches of a short, successful run."""
    batches: list[list[Message]] = [
        [Log(text="engine starting")],
        [
            RunStarted(
                strategy="MirroredStrategy",
                strategy_kind="mirrored",
                num_replicas=1,
                devices=["/cpu:0"],
                tensorflow_version="2.99.0-fake",
                total_steps=steps,
            )
        ],
    ]
    for first in range(1, steps + 1, batch):
        numbers = list(range(first, min(first + batch, steps + 1)))
        batches.append(
            [
                StepMetrics(
                    steps=numbers,
                    losses=[1.0 / n for n in numbers],
                    elapsed_s=[0.01 * n for n in numbers],
                )
            ]
        )
    batches.append(
        [RunFinished(status="finished", last_step=steps, final_loss=1.0 / steps, elapsed_s=0.2)]
    )
    return batches


class FakeEngine:
    """Hands out scripted batches, one per poll; honours stop requests unless stubborn."""

    def __init__(
        self,
        batches: list[list[Message]],
        *,
        stubborn: bool = False,
        start_error: Exception | None = None,
        poll_error: Exception | None = None,
        endless: bool = False,
    ) -> None:
        self.batches = list(batches)
        self.stubborn = stubborn
        self.start_error = start_error
        self.poll_error = poll_error
        self.endless = endless
        self.started = self.stop_requested = self.killed = self.closed = False
        self._done = False
        self._lock = threading.Lock()
        self._step = 0

    @property
    def done(self) -> bool:
        return self._done

    def start(self) -> None:
        if self.start_error is not None:
            raise self.start_error
        self.started = True

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        time.sleep(min(timeout_s, 0.01))
        with self._lock:
            if self._done:
                return []
            if self.poll_error is not None and not self.batches:
                raise self.poll_error
            if self.killed:  # as EngineProcess reports a kill its parent asked for
                self._done = True
                return [
                    RunFinished(
                        status="stopped",
                        last_step=self._step,
                        final_loss=None,
                        elapsed_s=1.0,
                        killed=True,
                    )
                ]
            if self.stop_requested and not self.stubborn:
                self._done = True
                return [
                    RunFinished(
                        status="stopped", last_step=self._step, final_loss=0.5, elapsed_s=1.0
                    )
                ]
            if self.batches:
                batch = self.batches.pop(0)
            elif self.endless:
                self._step += 1
                batch = [
                    StepMetrics(steps=[self._step], losses=[0.5], elapsed_s=[0.01 * self._step])
                ]
            else:
                return []
            for message in batch:
                if isinstance(message, StepMetrics):
                    self._step = message.steps[-1]
                if isinstance(message, RunFinished | RunFailed):
                    self._done = True
            return batch

    def request_stop(self) -> None:
        self.stop_requested = True

    def kill(self) -> None:
        self.killed = True

    def stop(self, grace_s: float = 5.0) -> None:
        self.request_stop()
        if self.stubborn:
            self.kill()
        self._done = True

    def close(self) -> None:
        self.closed = True


def factory(
    engine: FakeEngine, made: list[tuple[Project, Path]] | None = None
) -> Callable[[Project, Path], FakeEngine]:
    """An engine factory that returns ``engine`` and records what it was asked to run."""

    def make(project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        if made is not None:
            made.append((project, run_dir))
        return engine

    return make


def told_steps(controller: RunController) -> list[StepsAdded]:
    """The steps the controller's run model takes, as its views are told them."""
    told: list[StepsAdded] = []

    def keep(_model: RunModel, event: RunEvent) -> None:
        if isinstance(event, StepsAdded):
            told.append(event)

    controller.changed.connect(keep)
    return told


class FakeCluster(FakeEngine):
    """A scripted cluster: task states follow its messages the way LocalCluster's do."""

    def __init__(self, batches: list[list[Message]], run_dir: Path, **options: bool) -> None:
        super().__init__(batches, **options)
        self.infos = {
            name: TaskInfo(
                name=name,
                address=f"127.0.0.1:{23000 + index}",
                state="starting",
                pid=4000 + index,
                last_line="",
                last_step=None,
                run_dir=run_dir / "tasks" / name.replace(":", "-"),
            )
            for index, name in enumerate(TASKS)
        }

    def tasks(self) -> list[TaskInfo]:
        return list(self.infos.values())

    def _update(self, name: str, **changes: object) -> None:
        self.infos[name] = dataclasses.replace(self.infos[name], **changes)  # type: ignore[arg-type]

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        batch = super().poll(timeout_s)
        for message in batch:
            if isinstance(message, Log) and message.task:
                self._update(message.task, last_line=message.text)
            elif isinstance(message, Resources) and message.task:
                self._update(message.task, resources=message)
            elif isinstance(message, RunStarted):
                for name in TASKS:
                    self._update(name, state="running")
            elif isinstance(message, StepMetrics):
                for name in TASKS:
                    self._update(name, last_step=message.steps[-1])
            elif isinstance(message, RunFinished):
                for name in TASKS:
                    self._update(name, state=message.status)
            elif isinstance(message, RunFailed):
                for name in TASKS:
                    failed = name == (message.task or TASKS[0])
                    self._update(name, state="failed" if failed else "stopped")
        return batch


def cluster_window(make_window, cluster_batches: list[list[Message]], **options: bool):
    """A window whose runs of multi-machine projects get a FakeCluster; the project is one."""
    made: list[FakeCluster] = []

    def make_cluster(project: Project, run_dir: Path, *, resume: bool = False) -> FakeCluster:
        made.append(FakeCluster(cluster_batches, run_dir, **options))
        return made[-1]

    window: MainWindow = make_window(cluster_factory=make_cluster)
    window.editor.strategy.fields.editors["kind"].set_value("multi_worker_mirrored")
    assert window.validation.valid, window.validation.problems
    return window, made


class FakeProcess:
    """Stands in for the panel's prediction process: notes when it starts and ends."""

    instances: ClassVar[list[FakeProcess]] = []

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.events: list[str] = []
        self.model = None
        FakeProcess.instances.append(self)

    def start(self) -> None:
        self.events.append("start")

    def predict(self, inputs: Sequence[Path], rows: Sequence[str]) -> PredictionResult:
        self.events.append("predict")
        return PredictionResult()

    def close(self) -> None:
        self.events.append("close")


class FakeSlurmRun(SlurmRun):
    """A submitted job whose chief's messages are scripted: PENDING first, then the run's
    start and steps until it is stopped."""

    def __init__(self, project: Project, run_dir: Path, batches: list[list[Message]]) -> None:
        super().__init__(project, run_dir, "42", run_dir.parent.parent)
        self.fake = FakeEngine(batches, endless=True)
        self.scancelled = False
        self.told = False

    @property
    def done(self) -> bool:
        return self.fake.done

    def start(self) -> None:
        self.fake.start()

    def poll(self, timeout_s: float = 0.1) -> list[Message]:
        if not self.told and self.on_state is not None:
            self.told = True
            self.on_state(JobState("PENDING", "Resources"))
            return []
        return self.fake.poll(timeout_s)

    def request_stop(self) -> None:
        self.scancelled = True
        self.fake.request_stop()

    def kill(self) -> None:
        self.fake.kill()

    def close(self) -> None:
        self.fake.close()


TASKS = ("worker:0", "worker:1")
