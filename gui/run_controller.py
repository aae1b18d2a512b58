"""One run's session with its engine process, kept out of the widgets so it can be tested.

The controller starts an engine, reads its messages in an asyncio task (qasync
runs asyncio on Qt's event loop) that awaits ``engine.poll`` in a worker thread,
so the Qt thread never blocks, and re-emits each message as a Qt signal. Stop
asks the engine to stop after its current step and kills it if it has not
stopped within :data:`KILL_AFTER_S`. Every run ends with exactly one of
``finished`` or ``failed``, then ``idle`` once the engine is closed.
"""

from __future__ import annotations

import asyncio
import enum
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, QTimer, Signal

from ..engine.config import Project
from ..engine.messages import (
    EvalMetrics,
    Log,
    Message,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from ..engine.process import EngineProcess

KILL_AFTER_S = 5.0
POLL_S = 0.1


class Engine(Protocol):
    """What the controller needs of an engine (``engine.process.EngineProcess``)."""

    @property
    def done(self) -> bool: ...

    def start(self) -> None: ...

    def poll(self, timeout_s: float = POLL_S) -> list[Message]: ...

    def request_stop(self) -> None: ...

    def kill(self) -> None: ...

    def stop(self, grace_s: float = KILL_AFTER_S) -> None: ...

    def close(self) -> None: ...


EngineFactory = Callable[[Project, Path], Engine]


class ResumeFactory(Protocol):
    """Makes an engine that continues the run in ``run_dir`` from its last checkpoint."""

    def __call__(self, project: Project, run_dir: Path, *, resume: bool) -> Engine: ...


class RunState(enum.Enum):
    IDLE = "idle"
    STARTING = "starting"  # the engine process is loading TensorFlow
    RUNNING = "running"
    STOPPING = "stopping"


class RunController(QObject):
    """Runs one project at a time and reports it through signals."""

    state_changed = Signal(object)  # RunState
    log = Signal(object)  # engine.messages.Log
    started = Signal(object)  # RunStarted
    metrics = Signal(object)  # StepMetrics
    evaluated = Signal(object)  # EvalMetrics
    finished = Signal(object)  # RunFinished
    failed = Signal(object)  # RunFailed
    idle = Signal()  # the engine is closed; a new run may start

    def __init__(
        self,
        engine_factory: EngineFactory = EngineProcess,
        *,
        resume_factory: ResumeFactory = EngineProcess,
        kill_after_s: float = KILL_AFTER_S,
        poll_s: float = POLL_S,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self._factory = engine_factory
        # Its own factory: a resumed run is always one engine process in an existing folder.
        self._resume_factory = resume_factory
        self._poll_s = poll_s
        self._engine: Engine | None = None
        self._task: asyncio.Task[None] | None = None
        self._state = RunState.IDLE
        self.stop_requested = False
        self.killed = False
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_after_ms = round(kill_after_s * 1000)
        self._kill_timer.setInterval(self._kill_after_ms)
        self._kill_timer.timeout.connect(self._kill_if_running)

    @property
    def state(self) -> RunState:
        return self._state

    @property
    def active(self) -> bool:
        """True from Run until the engine is closed."""
        return self._state is not RunState.IDLE

    @property
    def engine(self) -> Engine | None:
        return self._engine

    def start(self, project: Project, run_dir: Path, *, resume: bool = False) -> None:
        """Starts an engine for ``project``; failures to start arrive as ``failed``.

        ``resume`` continues the run already in ``run_dir`` from its last checkpoint.
        """
        if self.active:
            raise RuntimeError("a run is already active")
        loop = asyncio.get_running_loop()
        self.stop_requested = False
        self.killed = False
        engine = (
            self._resume_factory(project, run_dir, resume=True)
            if resume
            else self._factory(project, run_dir)
        )
        self._engine = engine
        self._set_state(RunState.STARTING)
        try:
            engine.start()
        except Exception as exc:  # a process that cannot start is a failed run, not a crash
            self._engine = None
            self.failed.emit(
                RunFailed(
                    error_type=type(exc).__name__,
                    message=f"the engine process could not start: {exc}",
                    traceback=traceback.format_exc(),
                )
            )
            self._set_state(RunState.IDLE)
            self.idle.emit()
            return
        self._task = loop.create_task(self._pump(engine))

    def stop(self) -> None:
        """Asks the engine to stop after its current step; kills it if it does not."""
        if self._engine is None or self._state is RunState.STOPPING:
            return
        self.stop_requested = True
        self._engine.request_stop()
        self._set_state(RunState.STOPPING)
        # An engine that ends its own stragglers (a local cluster, which first saves an
        # agreed checkpoint) gets its grace and a little more before the window kills.
        own_grace_s = getattr(self._engine, "stop_grace_s", None)
        if own_grace_s is None:
            self._kill_timer.start(self._kill_after_ms)
        else:
            self._kill_timer.start(max(self._kill_after_ms, round((own_grace_s + 2) * 1000)))

    def shutdown(self, grace_s: float = KILL_AFTER_S) -> None:
        """Blocking last resort when the app quits: no engine may outlive the window."""
        if self._engine is not None and not self._engine.done:
            self._engine.stop(grace_s)

    async def _pump(self, engine: Engine) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not engine.done:
                for message in await loop.run_in_executor(None, engine.poll, self._poll_s):
                    self._dispatch(message)
        except Exception as exc:  # the engine's queue broke: end the run, keep the GUI
            engine.kill()
            self.failed.emit(
                RunFailed(
                    error_type=type(exc).__name__,
                    message=f"lost contact with the engine process: {exc}",
                    traceback=traceback.format_exc(),
                )
            )
        finally:
            self._kill_timer.stop()
            engine.close()
            self._engine = None
            self._set_state(RunState.IDLE)
            self.idle.emit()

    def _dispatch(self, message: Message) -> None:
        if isinstance(message, Log):
            self.log.emit(message)
        elif isinstance(message, StepMetrics):
            self.metrics.emit(message)
        elif isinstance(message, EvalMetrics):
            self.evaluated.emit(message)
        elif isinstance(message, RunStarted):
            if self._state is RunState.STARTING:
                self._set_state(RunState.RUNNING)
            self.started.emit(message)
        elif isinstance(message, RunFinished):
            self.finished.emit(message)
        elif isinstance(message, RunFailed):
            self.failed.emit(message)

    def _kill_if_running(self) -> None:
        if self._engine is not None and not self._engine.done:
            self.killed = True
            self.log.emit(
                Log(
                    level="warning",
                    text=f"the engine did not stop within {self._kill_timer.interval() / 1000:g} s;"
                    " killing it",
                )
            )
            self._engine.kill()

    def _set_state(self, state: RunState) -> None:
        if state is not self._state:
            self._state = state
            self.state_changed.emit(state)
