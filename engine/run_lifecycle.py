"""Where a run stands, as its protocol messages say it: started, stepped, ended (TF-free).

Every handle on a run (an engine process, a task over SSH, a local cluster's tasks, a
Slurm job's chief, a finder's trial) reads the same stream of
``engine.messages`` and needs the same few facts from it: has the run started its loop
(and does it only serve, as a parameter-server cluster's ps and workers do), its last
step with that step's loss and training clock, and its one terminal message. They are
kept here, once, so that no handle sorts the raw messages for them again; each handle
keeps only its own rules on top (how long to hold a terminal message, a Slurm requeue).

A run killed on request says nothing more, so its handle reports it ``stopped`` from what
was noted here (:meth:`RunLifecycle.stopped`), the same way wherever it was killed.
"""

from __future__ import annotations

from .messages import Message, RunFailed, RunFinished, RunStarted, StepMetrics


class RunLifecycle:
    """One run's stream, noted message by message (:meth:`note`).

    ``task`` names the run's task in the messages made here (``worker:1``; None for a
    single-process run).
    """

    def __init__(self, task: str | None = None) -> None:
        self.task = task
        self.started: RunStarted | None = None
        """The run's RunStarted: what runs, and whether it only serves."""
        self.last_step: int | None = None
        """The last step reported; None before the first."""
        self.last_loss: float | None = None
        """That step's loss."""
        self.last_elapsed_s = 0.0
        """That step's training clock (metrics.csv's), 0 before the first step."""
        self.terminal: RunFinished | RunFailed | None = None
        """The run's last message: how it ended."""

    def note(self, message: Message) -> None:
        """Takes the next message of the run; any message, in the order it came."""
        if isinstance(message, StepMetrics) and message.steps:
            self.last_step, self.last_loss = message.steps[-1], message.losses[-1]
            self.last_elapsed_s = message.elapsed_s[-1]
        elif isinstance(message, RunStarted):
            self.started = message
        elif isinstance(message, RunFinished | RunFailed):
            self.terminal = message

    @property
    def stepped(self) -> bool:
        """The run reported a step: it has something to checkpoint, and a stop reaches it."""
        return self.last_step is not None

    @property
    def serving(self) -> bool:
        """A ps or worker task of a parameter-server cluster: it serves and never steps."""
        return self.started is not None and self.started.serving is not None

    @property
    def ended(self) -> bool:
        """The run's terminal message came."""
        return self.terminal is not None

    @property
    def failed(self) -> bool:
        """The run ended with a RunFailed."""
        return isinstance(self.terminal, RunFailed)

    def stopped(self, *, killed: bool, last_step: int | None = None) -> RunFinished:
        """The run's end as ``stopped`` when it cannot say so itself: killed on request
        (``killed``: without a new checkpoint, it resumes from its last one), or ended
        without its own last message.

        ``last_step`` stands in for the last step reported when there is one from
        elsewhere (a run folder's ``status.json``). The duration is the training clock
        of the last step (metrics.csv's), which the engine's start-up and the time to the
        kill are not.
        """
        step = self.last_step if last_step is None else last_step
        return RunFinished(
            status="stopped",
            last_step=step or 0,
            final_loss=self.last_loss,
            elapsed_s=self.last_elapsed_s,
            killed=killed,
            task=self.task,
        )
