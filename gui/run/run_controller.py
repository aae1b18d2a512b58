"""One run's session with its engine, kept out of the widgets so it can be tested.

The controller opens the run with the engine's own :func:`engine.run_handle.open_run`
(one engine process, the warm one when it is ready, or a local cluster: the same
choice ``distloop`` makes), reads its messages in an asyncio task (qasync runs
asyncio on Qt's event loop) that awaits ``poll`` in a worker thread, so the Qt
thread never blocks, and feeds each into the run's :class:`engine.run_model.RunModel`
unread: the protocol is the model's business, and the controller, like every view,
follows the run by the model's events (a start that failed, or a stream that broke,
it tells the model as a plain failure). What the run's views see comes from the model
alone: its typed events
(:mod:`engine.run_events`) are bridged to one Qt signal, ``changed``, so every panel
hears one channel; the controller itself only tells the engine's lifecycle
(``state_changed``, and ``idle`` once the engine is closed and a new run may start).
Stop and kill are the run's :class:`engine.run_session.RunSession`'s, as the command
line's are: it asks the engine to stop after its current step and kills it only if it
does not get there (the step under way, then its checkpoint and model); the controller's
one timer calls the session when it says a wait runs out, and the log says what took the
time.
While a cluster runs, its tasks are read a few times a second (cheap attribute reads,
safe beside the poll running in the executor) and set on the model.
With the window's MLflow preference on (``live_mlflow``), the run's model has a
:class:`engine.mlflow_log.LiveLogger` listening too: the window, which follows the whole
run (a cluster's every task), logs it as one MLflow run, never each worker.
"""

from __future__ import annotations

import asyncio
import enum
import math
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from PySide6.QtCore import QObject, QTimer, Signal

from ...engine.cluster.placement import Placement
from ...engine.config import Project
from ...engine.engine_handle import ClusterFactory, ClusterHandle, EngineFactory, EngineHandle
from ...engine.formatting import format_duration
from ...engine.mlflow_log import LiveLogger, LiveSettings
from ...engine.process import WarmEngines
from ...engine.run_events import RunEvent, RunFailure, StatusChanged, StepsAdded
from ...engine.run_folder import update_status
from ...engine.run_handle import open_run
from ...engine.run_model import RunModel
from ...engine.run_session import KILL_AFTER_S, Overdue, RunSession

POLL_S = 0.1
REFRESH_MS = 250


class RunState(enum.Enum):
    IDLE = "idle"
    STARTING = "starting"  # the engine process is loading TensorFlow
    RUNNING = "running"
    STOPPING = "stopping"


class RunController(QObject):
    """Runs one project at a time; its run model reports the run."""

    state_changed = Signal(object)  # RunState
    idle = Signal()  # the engine is closed; a new run may start
    changed = Signal(object, object)  # RunModel, and its RunEvent
    _live_failed = Signal(str)  # from the MLflow logger's thread: its one line

    def __init__(
        self,
        engine_factory: EngineFactory | None = None,
        cluster_factory: ClusterFactory | None = None,
        *,
        warm_engines: WarmEngines | None = None,
        kill_after_s: float = KILL_AFTER_S,
        poll_s: float = POLL_S,
        refresh_ms: int = REFRESH_MS,
        parent: QObject | None = None,
    ) -> None:
        """``engine_factory`` and ``cluster_factory`` stand in for the real processes
        (tests); ``warm_engines`` keeps one engine ready for single-process runs: a run
        takes it, and the next one loads once that run is past its start (its first
        step, or its end), so the two never share the CPU at start-up.
        """
        super().__init__(parent)
        self._engine_factory = engine_factory
        self._cluster_factory = cluster_factory
        self._warm_engines = warm_engines
        self._warm_taken = False
        self._warm_closed = False
        self._poll_s = poll_s
        self._engine: EngineHandle | None = None
        self._cluster: ClusterHandle | None = None
        self._hosts: Placement | None = None
        self._project: Project | None = None
        self._model: RunModel | None = None
        self._task: asyncio.Task[None] | None = None
        self._active = False
        self._told_state = RunState.IDLE
        self._session: RunSession | None = None
        """The latest run's session: its stop and kill (it stays after the run)."""
        self._kill_after_s = kill_after_s
        self._kill_timer = QTimer(self)
        self._kill_timer.setSingleShot(True)
        self._kill_timer.timeout.connect(self._kill_if_running)
        self._tasks_timer = QTimer(self)
        self._tasks_timer.setInterval(refresh_ms)
        self._tasks_timer.timeout.connect(self.refresh)
        self.live_mlflow: Callable[[], LiveSettings | None] = lambda: None
        """Where each run is logged to MLflow as it trains (the window's preference)."""
        self._live: LiveLogger | None = None
        self._live_failed.connect(lambda line: self._log(line, "warning"))

    @property
    def state(self) -> RunState:
        """The engine's lifecycle, read from the run's model and the user's stop: the run's
        status is kept once, in its model."""
        if not self._active:
            return RunState.IDLE
        if self.stop_requested:
            return RunState.STOPPING
        if self._model is None or self._model.started is None:
            return RunState.STARTING
        return RunState.RUNNING

    @property
    def stop_requested(self) -> bool:
        """The latest run was asked to stop (Stop, or a kill)."""
        return self._session is not None and self._session.stop_requested

    @property
    def killed(self) -> bool:
        """The latest run's engine was killed: on request, or it did not stop in time."""
        return self._session is not None and self._session.killed

    @property
    def active(self) -> bool:
        """True from Run until the engine is closed."""
        return self._active

    @property
    def engine(self) -> EngineHandle | None:
        return self._engine

    @property
    def cluster(self) -> ClusterHandle | None:
        """The running cluster, or the last one (its tasks show how each ended)."""
        return self._cluster

    @property
    def hosts(self) -> Placement | None:
        """How the running cluster's tasks reach their hosts; None for a run on this machine."""
        return self._hosts

    @property
    def model(self) -> RunModel | None:
        """The latest run's model (it stays after the run, for the views)."""
        return self._model

    def start(
        self,
        project: Project,
        run_dir: Path,
        *,
        resume: bool = False,
        model: RunModel | None = None,
        hosts: Placement | None = None,
        opened: EngineHandle | None = None,
        stop_grace_s: float | None = None,
    ) -> None:
        """Opens and starts the run; failures to start arrive as ``failed``.

        ``resume`` continues the run already in ``run_dir`` from its last checkpoint.
        ``model`` is the run's model when the caller made it (a resumed run's, loaded
        from its folder), else a fresh one. ``hosts``: the cluster's tasks run on the
        hosts its TF_CONFIG names, over ssh (``distloop launch``'s way); at the end the
        chief's run folder is copied back into ``run_dir``, off the window's thread.
        ``opened``: the run's handle when it is no engine open_run opens (a submitted Slurm
        job, :mod:`engine.cluster.slurm_jobs`); ``stop_grace_s``: how long Stop waits for
        it before the window ends it (its own, for a handle that has one).
        """
        if self.active:
            raise RuntimeError("a run is already active")
        loop = asyncio.get_running_loop()
        run_model = model or RunModel(total_steps=project.total_steps(), run_dir=run_dir)
        session = RunSession(  # the first to hear the model: the views read its stop
            run_model,
            kill_after_s=self._kill_after_s,
            steps_per_execution=project.training.steps_per_execution,
            stop_grace_s=stop_grace_s,
        )
        self._session = session
        run_model.subscribe(lambda event: self._on_event(run_model, event))
        live = self.live_mlflow()
        if live is not None:
            self._live = LiveLogger(live, run_dir, on_error=self._live_failed.emit)
            run_model.subscribe(self._live.on_event)
        self._model = run_model
        self._active = True
        self._tell_state()
        self._hosts, self._project = hosts, project
        try:
            engine = opened or open_run(
                project,
                run_dir,
                resume=resume,
                layout="auto" if hosts is None else "cluster",
                warm_engines=self._warm_engines,
                engine_factory=self._engine_factory,
                cluster_factory=self._cluster_factory,
                placement=hosts,
            )
            self._engine = engine
            settings = hosts.settings(project) if hosts is not None else None
            if settings is not None:  # what a resume needs to place the tasks the same way
                update_status(run_dir, launch=settings)
            if isinstance(engine, ClusterHandle):
                self._follow_cluster(engine)
            elif opened is None:  # a stand-in engine takes no warm one
                self._warm_taken = self._warm_engines is not None and self._engine_factory is None
            session.start(engine)
        except Exception as exc:  # a process that cannot start is a failed run, not a crash
            self._engine = None
            if hosts is not None:
                self._hosts = None
                hosts.close()
            self._fail(exc, f"the engine process could not start: {exc}")
            self._active = False
            self._tell_state()
            self._replace_warm_engine()
            if self._live is not None:
                self._live.close(timeout_s=0)  # nothing started: its MLflow run is not made
                self._live = None
            self.idle.emit()
            return
        self._task = loop.create_task(self._pump(session, engine))

    def stop(self) -> None:
        """Asks the engine to stop after its current step; kills it if it does not."""
        if self._engine is None or self._session is None or not self._session.request_stop():
            return
        self._tell_state()
        self._arm_kill_timer()

    def _follow_stop(self, event: RunEvent) -> None:
        """A stop's progress in the run's events: once the engine stopped stepping, the log
        says when and the session's wait for the saves is timed; at the end, the log says
        how long the saves took (before the end itself, which is told after this)."""
        session = self._session
        if session is None or session.killed or session.stop_asked_at is None:
            return
        stepped = session.stopped_stepping
        if stepped is None:
            return
        stepped_at, stopping = stepped
        if event is stopping:  # the session just heard it (it hears the model first)
            self._arm_kill_timer()
            saving = f"; saving {' and '.join(stopping.saving)}" if stopping.saving else ""
            self._log(
                f"stopped after step {stopping.last_step:,}, "
                f"{format_duration(stepped_at - session.stop_asked_at)} after Stop{saving}"
            )
        elif (
            isinstance(event, StatusChanged)
            and event.outcome is not None
            and session.ended_at is not None
            and stopping.saving
        ):
            saved = f"saving {' and '.join(stopping.saving)} took "
            self._log(f"{saved}{format_duration(session.ended_at - stepped_at)}")

    def kill(self) -> None:
        """Ends the engine now (a second Ctrl-C): the run ends stopped, killed on request."""
        if self._engine is not None and self._session is not None and not self._session.done:
            self._session.kill()
            self._kill_timer.stop()  # a kill is the last word: no wait runs on
            self._tell_state()

    def shutdown(self, grace_s: float = KILL_AFTER_S) -> None:
        """Blocking last resort when the app quits: no engine may outlive the window."""
        if self._engine is not None and not self._engine.done:
            self._engine.stop(grace_s)

    # --- warm engines -------------------------------------------------------------------

    def prepare_warm_engine(self) -> None:
        """Starts a warm engine unless one is ready or they were closed."""
        if self._warm_engines is not None and not self._warm_closed:
            self._warm_engines.prepare()

    def stop_warming(self) -> None:
        """Starts no other warm engine (the window closes once its run ended)."""
        self._warm_closed = True

    def close_warm_engines(self) -> None:
        """Ends the idle warm engine and starts no other (the window closes)."""
        self._warm_closed = True
        if self._warm_engines is not None:
            self._warm_engines.close()

    def _replace_warm_engine(self) -> None:
        if self._warm_taken:
            self._warm_taken = False
            self.prepare_warm_engine()

    # --- clusters -----------------------------------------------------------------------

    def _follow_cluster(self, cluster: ClusterHandle) -> None:
        self._cluster = cluster
        if self._model is not None:
            self._model.set_tasks(cluster.tasks())
        self._tasks_timer.start()

    def refresh(self) -> None:
        """Publishes the tasks' state; the first refresh after the cluster ended is the last."""
        cluster = self._cluster
        if cluster is None:
            return
        if self._model is not None:
            self._model.set_tasks(cluster.tasks())
        if cluster.done:
            self._tasks_timer.stop()

    # --- the run's messages -------------------------------------------------------------

    async def _pump(self, session: RunSession, engine: EngineHandle) -> None:
        loop = asyncio.get_running_loop()
        try:
            while not engine.done:
                for message in await loop.run_in_executor(None, session.poll, self._poll_s):
                    session.take(message)
        except Exception as exc:  # the engine's queue broke: end the run, keep the GUI
            session.lost()  # its saves did not end: no time to tell
            self._fail(exc, f"lost contact with the engine process: {exc}")
        finally:
            self._kill_timer.stop()
            # After the run's end is shown: the engine's exit (its files, TensorFlow's
            # teardown) takes seconds, waited for off the Qt thread.
            await loop.run_in_executor(None, engine.close)
            if self._hosts is not None:
                await self._bring_back(self._hosts)
            if self._live is not None:  # after the chief's folder came back: its model
                await self._finish_live(self._live)
            self._engine = None
            self._active = False
            self._tell_state()
            self._replace_warm_engine()
            self.idle.emit()

    async def _bring_back(self, hosts: Placement) -> None:
        """The chief's run folder from its host into the run's, so the runs list, Try It and
        Resume find its model and checkpoints; then the shared ssh connections end."""
        run_dir = self._model.run_dir if self._model is not None else None
        project = self._project
        loop = asyncio.get_running_loop()
        try:
            if run_dir is not None and project is not None:
                self._log("copying the chief's run folder back from its host…")
                said = await loop.run_in_executor(None, hosts.bring_back, project, run_dir)
                if said is not None:
                    self._log(said)
        except OSError as exc:
            self._log(str(exc), "warning")
        finally:
            self._hosts = None
            await loop.run_in_executor(None, hosts.close)

    async def _finish_live(self, live: LiveLogger) -> None:
        """Waits, off the Qt thread, for the run's last steps and its end to reach MLflow,
        and says in the log where they are."""
        self._live = None
        await asyncio.get_running_loop().run_in_executor(None, live.close)
        if live.run_id is not None:
            self._log(f"MLflow run {live.run_id}: {live.logged:,} metric values logged")

    def _log(self, text: str, level: Literal["info", "warning"] = "info") -> None:
        """A line of the window's own about the run, in its log."""
        if self._model is not None:
            self._model.log(text, level)

    def _fail(self, exc: Exception, message: str) -> None:
        """The run failed in the window, not in its engine (it could not start, or its
        stream broke): it ends failed, with the exception's traceback for the log."""
        if self._model is not None:
            self._model.fail(RunFailure(type(exc).__name__, message, traceback.format_exc()))

    def _on_event(self, model: RunModel, event: RunEvent) -> None:
        """Follows the engine's lifecycle from the model's event, then bridges the event
        to Qt (a view that is gone is disconnected)."""
        if model is self._model:  # not an earlier run's model, changed after its run
            if isinstance(event, StepsAdded):
                self._replace_warm_engine()
            self._follow_stop(event)
            self._tell_state()
        self.changed.emit(model, event)

    def _arm_kill_timer(self) -> None:
        """Times the session's next look: when its wait for the engine runs out."""
        due_in_s = self._session.due_in_s if self._session is not None else None
        if due_in_s is None:
            self._kill_timer.stop()
        else:
            self._kill_timer.start(max(0, math.ceil(due_in_s * 1000)))

    def _kill_if_running(self) -> None:
        """The session kills the engine if its wait ran out (a timer may fire a little
        early: then it is timed again), and the log says what the engine did not finish."""
        overdue = self._session.tick() if self._session is not None else None
        if overdue is None:
            self._arm_kill_timer()
        else:
            self._log(_overdue_line(overdue), "warning")

    def _tell_state(self) -> None:
        state = self.state
        if state is not self._told_state:
            self._told_state = state
            self.state_changed.emit(state)


def _overdue_line(overdue: Overdue) -> str:
    """Why the engine was killed, for the log (the window sets no deadline of its own for
    the run's end: its waits are the step under way and the saves)."""
    within = format_duration(overdue.within_s)
    if overdue.waited_for == "saves":
        saving = " and ".join(overdue.saving) or "its files"
        return f"the engine did not finish saving {saving} within {within}; killing it"
    return f"the engine did not finish its step within {within} of Stop; killing it"
