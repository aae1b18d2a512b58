"""A scripted stand-in for engine.process.EngineProcess (GUI unit tests only)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from distloop.engine.config import Project
from distloop.engine.messages import Log, Message, RunFailed, RunFinished, RunStarted, StepMetrics
from distloop.engine.run_events import RunEvent, StepsAdded
from distloop.engine.run_model import RunModel
from distloop.gui.run.run_controller import RunController


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
