"""Why a run is slow, in words: input-bound tasks and the straggler, from their samples.

Every task sends :class:`~engine.messages.Resources` samples (``engine.system_metrics``);
a cluster's stream carries all of them (``engine.cluster``). :class:`Findings` keeps the
last :data:`WINDOW_S` seconds of each task's and says, in one line each with the numbers
behind it:

- *input-bound*: a task whose steps spend :data:`INPUT_BOUND_SHARE` or more of their time
  waiting for the input pipeline's next element;
- *the straggler*: in synchronous training every step is a collective, so every task's
  step takes as long as the slowest one's. What a task loses on its own (waiting for its
  input, or held up: stopped, throttled, starved of CPU) its peers spend waiting for it.
  The task that loses the most per step, by enough that the steps take
  :data:`STRAGGLER_RATIO` times what they would take without that excess, is named.

A finding is said once, and again only when it changes (another task, or its numbers by
a coarse step), so the log and the terminal are not flooded every second.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Literal

from .messages import Resources

WINDOW_S = 20.0
"""The findings describe the last this many seconds of each task: recent enough to follow
a change, long enough to smooth one slow step."""
INPUT_BOUND_SHARE = 0.4
"""Below it, fetching the next element is the usual cost of a small step (the seed model's
distributed iterator takes about a fifth of its 4 ms step on a CPU here)."""
STRAGGLER_RATIO = 1.25
MIN_INPUT_WAIT_S = 0.002
"""Nor is a wait under this per step a slow pipeline: it is what handing over an element
costs in Python (the distributed iterator's ~1 ms), whatever the pipeline does."""
MIN_STEPS = 3
MIN_SAMPLED_S = 2.5
"""Fewer steps or seconds of samples than this are no evidence yet."""
INPUT_ADVICE = "try data.cache, a larger prefetch, or fewer augmentations"


@dataclass(frozen=True)
class TaskLoad:
    """One task's recent steps: how many, their seconds, the input wait and hold-ups in them."""

    task: str | None
    steps: int
    step_s: float
    input_wait_s: float
    held_s: float
    sampled_s: float
    input_timed: bool = True
    """False where the run cannot time its input wait (fused steps under op determinism)."""

    @property
    def per_step_s(self) -> float:
        return self.step_s / self.steps

    @property
    def input_share(self) -> float:
        return self.input_wait_s / self.step_s if self.step_s > 0 else 0.0

    @property
    def held_share(self) -> float:
        return min(1.0, self.held_s / self.step_s) if self.step_s > 0 else 0.0

    @property
    def lost_per_step_s(self) -> float:
        """What the task lost on its own per step: its peers wait that long for it."""
        return (self.input_wait_s + min(self.held_s, self.step_s)) / self.steps

    def evidence(self) -> str:
        name = f"{self.task}: " if self.task else ""
        waiting = f"{self.input_share:.0%}" if self.input_timed else "untimed"
        return (
            f"{name}{self.per_step_s * 1000:.1f} ms/step, {waiting} waiting for input, "
            f"{self.held_share:.0%} held up"
        )


@dataclass(frozen=True)
class Finding:
    kind: Literal["input_bound", "straggler"]
    task: str | None
    text: str
    evidence: str
    """The per-task numbers the text stands on."""
    bucket: tuple[int, ...]
    """The numbers, coarsely: a finding is said again only when these change."""

    @property
    def line(self) -> str:
        return f"{self.text} ({self.evidence})"


class Findings:
    """The current findings of a run from its tasks' samples; see the module docstring."""

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._samples: dict[str | None, deque[Resources]] = {}
        self.current: list[Finding] = []
        self.new: list[Finding] = []
        """At the last change, the findings to be said: those not said before it."""

    def add(self, sample: Resources) -> bool:
        """Takes one task's sample; True when the findings changed (``new`` says them)."""
        window = self._samples.setdefault(sample.task, deque())
        window.append(sample)
        while window and window[0].time < sample.time - self._window_s:
            window.popleft()
        findings = self._find()
        changed = [(f.kind, f.task, f.bucket) for f in findings] != [
            (f.kind, f.task, f.bucket) for f in self.current
        ]
        if changed:
            said = {f.line for f in self.current}
            self.new = [f for f in findings if f.line not in said]
        self.current = findings  # the latest numbers, said or not
        return changed

    def loads(self) -> list[TaskLoad]:
        """Each task's recent steps, for tasks with enough of them to judge."""
        loads = []
        for task, window in self._samples.items():
            stepping = [s for s in window if s.steps]
            load = TaskLoad(
                task=task,
                steps=sum(s.steps for s in stepping),
                step_s=sum(s.step_s for s in stepping),
                input_wait_s=sum(s.input_wait_s or 0.0 for s in stepping),
                input_timed=all(s.input_wait_s is not None for s in stepping),
                held_s=sum(s.held_s for s in stepping),
                sampled_s=sum(s.interval_s for s in stepping),
            )
            if load.steps >= MIN_STEPS and load.sampled_s >= MIN_SAMPLED_S and load.step_s > 0:
                loads.append(load)
        return sorted(loads, key=lambda load: load.task or "")

    def straggler(self) -> Finding | None:
        return next((f for f in self.current if f.kind == "straggler"), None)

    def _find(self) -> list[Finding]:
        loads = self.loads()
        evidence = "; ".join(load.evidence() for load in loads)
        found = [
            Finding(
                kind="input_bound",
                task=load.task,
                text=(f"{load.task} is input-bound: " if load.task else "input-bound: ")
                + f"{load.input_share:.0%} of each step waits for data ({INPUT_ADVICE})",
                evidence=evidence,
                bucket=(int(load.input_share * 5),),
            )
            for load in loads
            if load.input_timed
            and load.input_share >= INPUT_BOUND_SHARE
            and load.input_wait_s / load.steps >= MIN_INPUT_WAIT_S
        ]
        straggler = _straggler(loads, evidence)
        return found + ([straggler] if straggler else [])


def _straggler(loads: list[TaskLoad], evidence: str) -> Finding | None:
    """The task its peers wait for, when there are peers and the wait is worth saying."""
    if len(loads) < 2:
        return None
    slowest = max(loads, key=lambda load: load.lost_per_step_s)
    others = [load for load in loads if load is not slowest]
    excess = slowest.lost_per_step_s - sum(o.lost_per_step_s for o in others) / len(others)
    step_s = sum(load.per_step_s for load in loads) / len(loads)
    ratio = step_s / max(step_s - excess, step_s / 100)
    if ratio < STRAGGLER_RATIO:
        return None
    waiting = slowest.input_wait_s / slowest.steps / step_s
    held = min(slowest.held_s, slowest.step_s) / slowest.steps / step_s
    parts = sorted(
        [
            (waiting, f"{waiting:.0%} of it waiting for input"),
            (held, f"{held:.0%} of it held up (stopped, throttled or short of CPU)"),
        ],
        reverse=True,
    )
    why = ", ".join(text for share, text in parts if share >= 0.05)
    return Finding(
        kind="straggler",
        task=slowest.task,
        text=f"{slowest.task} is the straggler: its steps take {ratio:.1f}x the others'"
        + (f", {why}" if why else ""),
        evidence=evidence,
        bucket=(round(ratio * 2),),
    )
