"""One run's session with its engine: the stop, the kill that may follow it, how it ended.

Whatever follows a run (the window's ``RunController``, the command line's ``follow``)
asks its engine to stop the same way, and kills it by the same rules, so those rules are
kept here, once, TensorFlow-free and Qt-free. :class:`RunSession` holds the run's handle
(``engine.engine_handle``) and its :class:`~engine.run_model.RunModel`, into which it
takes the handle's messages; the views follow the model, and the session follows it too,
for the one event a stop waits on (``SteppingStopped``).

A stop asks the engine to stop after its current step. A session given waits kills it
only if it does not get there: it waits for the step under way (at least ``kill_after_s``,
longer when the run's recent steps take longer, and an engine that ends its own stragglers
gets its grace and a little more), then, once the engine says it stopped stepping, for its
checkpoint and model (``save_within_s``). :meth:`RunSession.kill_after` sets a deadline no
step or save moves (the launcher that started the run is gone). The session keeps no timer
and no thread: :attr:`RunSession.due_in_s` says when :meth:`RunSession.tick` should look
next, so the window's timer and the command line's poll loop call
it at their own pace, and a test turns a scripted clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from .engine_handle import POLL_S, EngineHandle
from .messages import Message
from .run_events import RunEvent, RunOutcome, StatusChanged, SteppingStopped
from .run_model import RunModel

KILL_AFTER_S = 5.0
"""The least a stop waits for the engine's step under way before it kills the engine."""
STEP_WAITS = 3
"""A stop waits for this many of the run's recent executions (their steps) at least."""
OWN_GRACE_MARGIN_S = 2.0
"""What an engine with its own stop grace gets beyond it, to end its stragglers itself."""
SAVE_WITHIN_S = 300.0
"""Once the engine stopped stepping, how long its saves may take before it is killed:
a hung file system, not a large model (hundreds of MB write in seconds)."""


@dataclass(frozen=True)
class Overdue:
    """What the engine did not finish in time, so the session killed it: its step under
    way after a stop (``step``), its saves after it stopped stepping (``saves``, what it was
    saving), or its end by a deadline set with :meth:`RunSession.kill_after` (``end``)."""

    waited_for: Literal["step", "saves", "end"]
    within_s: float
    saving: tuple[str, ...] = ()


class RunSession:
    """One run's handle and model, its stop and its kill.

    ``kill_after_s`` and ``save_within_s`` are the waits of a stop (None: the session waits
    as long as the engine takes, and only :meth:`kill` or :meth:`kill_after` ends it);
    ``steps_per_execution`` turns the model's step rate into the time of one execution;
    ``stop_grace_s`` is how long the engine may take to end its own stragglers (else the
    handle's own ``stop_grace_s``, a local cluster's). ``clock`` is the session's time.
    """

    def __init__(
        self,
        model: RunModel,
        *,
        kill_after_s: float | None = KILL_AFTER_S,
        save_within_s: float | None = SAVE_WITHIN_S,
        steps_per_execution: int = 1,
        stop_grace_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.model = model
        self.handle: EngineHandle | None = None
        """The run's engine once it started; None before, or when it could not start."""
        self.stop_requested = False
        """A stop was asked for (a kill asks for one too)."""
        self.killed = False
        """The session killed the engine: asked to (:meth:`kill`), or a wait ran out."""
        self.stop_asked_at: float | None = None
        self.stopped_stepping: tuple[float, SteppingStopped] | None = None
        """When the engine said it stopped stepping after the stop, and what it saves."""
        self.ended_at: float | None = None
        """When the run's end reached the model."""
        self._kill_after_s = kill_after_s
        self._save_within_s = save_within_s
        self._steps_per_execution = steps_per_execution
        self._stop_grace_s = stop_grace_s
        self._clock = clock
        self._waiting: tuple[float, Overdue] | None = None
        """When the stop's wait for the step, then for the saves, runs out."""
        self._end_by: tuple[float, Overdue] | None = None
        """A deadline for the run's end that nothing the engine does moves."""
        model.subscribe(self._follow)

    def start(self, handle: EngineHandle) -> None:
        """Starts the run's engine; what its start raises, the caller answers."""
        handle.start()
        self.handle = handle

    @property
    def done(self) -> bool:
        """The engine is gone (or never started): nothing more will come."""
        return self.handle is None or self.handle.done

    @property
    def outcome(self) -> RunOutcome | None:
        """How the run ended, once its end came."""
        return self.model.outcome

    def poll(self, timeout_s: float = POLL_S) -> list[Message]:
        """The engine's next messages, read on any thread; :meth:`take` each in order."""
        return [] if self.handle is None else self.handle.poll(timeout_s)

    def take(self, message: Message) -> None:
        """One message into the run's model, whose listeners (the views) hear of it."""
        self.model.apply(message)

    def request_stop(self) -> bool:
        """Asks the engine to stop after its current step; False if it was asked already,
        or there is no engine to ask."""
        if self.handle is None or self.stop_requested:
            return False
        self.stop_requested = True
        self.stop_asked_at = self._clock()
        self.stopped_stepping = None
        self.handle.request_stop()
        self.model.stopping()
        if self._kill_after_s is not None:
            wait_s = self._step_wait_s(self._kill_after_s)
            self._waiting = (self.stop_asked_at + wait_s, Overdue("step", wait_s))
        return True

    def _step_wait_s(self, least_s: float) -> float:
        """How long a stop waits for the step under way: ``least_s``, or :data:`STEP_WAITS`
        of the run's recent executions when they take longer, or the engine's own grace
        and :data:`OWN_GRACE_MARGIN_S`."""
        wait_s = least_s
        own_grace_s = self._stop_grace_s or getattr(self.handle, "stop_grace_s", None)
        if own_grace_s is not None:
            wait_s = max(wait_s, own_grace_s + OWN_GRACE_MARGIN_S)
        rate = self.model.rate()
        if rate:
            wait_s = max(wait_s, STEP_WAITS * self._steps_per_execution / rate)
        return wait_s

    def kill_after(self, seconds: float) -> None:
        """Kills the engine unless the run ended within ``seconds`` from now, whatever it
        does meanwhile; an earlier such deadline stays."""
        end_by = self._clock() + seconds
        if self._end_by is None or end_by < self._end_by[0]:
            self._end_by = (end_by, Overdue("end", seconds))

    def kill(self) -> None:
        """Ends the engine now: the run ends stopped, killed on request, resumable from its
        last checkpoint. A kill is the last word: no wait runs on after it."""
        if self.handle is not None and not self.handle.done:
            self.stop_requested = self.killed = True
            self._waiting = self._end_by = None
            self.handle.kill()

    def lost(self) -> None:
        """The engine's stream broke: it is killed, no wait runs on, and its saves never
        ended (the run fails; it was not killed on request)."""
        self._waiting = self._end_by = None
        self.stopped_stepping = None
        if self.handle is not None:
            self.handle.kill()

    @property
    def due_in_s(self) -> float | None:
        """How long from now :meth:`tick` should next look; None while no wait runs."""
        dues = [armed[0] for armed in (self._waiting, self._end_by) if armed is not None]
        if not dues or not self._running():
            return None
        return min(dues) - self._clock()

    def tick(self) -> Overdue | None:
        """Kills the engine if a wait ran out with it still running, and says which."""
        now = self._clock()
        for armed in (self._waiting, self._end_by):
            if armed is not None and armed[0] <= now and self._running():
                overdue = armed[1]
                self.kill()
                return overdue
        return None

    def _running(self) -> bool:
        return self.handle is not None and not self.handle.done

    def _follow(self, event: RunEvent) -> None:
        """The stop's progress in the run's events: once the engine stopped stepping, it
        gets the time to save; the end's time is kept for whoever says how long that took."""
        if isinstance(event, StatusChanged) and event.outcome is not None:
            self.ended_at = self._clock()
        if not self.stop_requested or self.killed or self.stop_asked_at is None:
            return
        if isinstance(event, SteppingStopped) and self.stopped_stepping is None:
            now = self._clock()
            self.stopped_stepping = (now, event)
            self._waiting = None  # the step came to its end: now the saves have their time
            if self._save_within_s is not None:
                saves = Overdue("saves", self._save_within_s, event.saving)
                self._waiting = (now + self._save_within_s, saves)
