"""A synchronous cluster stops at one step, every task with it (imports TensorFlow).

Under MultiWorkerMirroredStrategy every step is a collective. A task that stops on
its own (SIGTERM from a scheduler, Stop) leaves its peers waiting in the next
all-reduce until they time out and fail, and the checkpoints of the tasks that did
save would be of different steps. TensorFlow's
``tf.distribute.experimental.PreemptionCheckpointHandler`` aligns them: the task
told to stop claims the stop in the cluster's coordination service and names the
step after which every task saves (saving is collective); then every task ends.

How it is wired here, and why:

- ``termination_watcher_fn`` is the run's own stop request (SIGTERM, which
  ``engine.child_main`` turns into a flag, or the parent's Stop), polled by the
  handler once a second. Given one, the handler installs no SIGTERM handler of its
  own, so there is one handler for the signal, and Stop takes the same aligned path.
- ``save_fn`` saves through the loop's checkpoint hook (``engine.loop_hooks``) at
  the step the loop completed: the chief keeps the checkpoint, the others remove
  their temporary folder, and a resume restores it like any other checkpoint.
- The handler gets an empty checkpoint of its own, not the run's: it adds a run
  counter to the checkpoint it is given and restores it at start, and that counter
  must start equal on every task, which the run's would not (the chief restores
  one, a worker's emptied temporary folder none).
- ``exit_fn`` raises ``engine.loop.StopLoop`` instead of exiting the process, so
  the loop ends the run like a Stop: status ``stopped``, every step recorded,
  resumable.
- At its creation the handler asks the GCE metadata server whether it runs on
  Google Cloud; on a GCE CPU VM it would then watch nothing, and elsewhere the
  question can take seconds. It is pointed at a closed local port, so the answer
  is "no" at once and the behaviour is the same everywhere.

``save_checkpoint_if_preempted`` is called after each execution (one step, or
``steps_per_execution`` fused ones): the handler counts executions, which are the
same on every task, so fused steps stop on a step every task completed.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import tensorflow as tf

GCE_METADATA_ENV = "GCE_METADATA_IP"


class PreemptionWatch:
    """TensorFlow's preemption handler, wired as this module says (a ``loop_hooks.Preemption``).

    ``save`` saves the run's checkpoint at the step the loop completed; ``stop`` ends
    the loop (it raises ``engine.loop.StopLoop``). The loop's ``StopTogether`` hook
    decides when to ask (after every execution) and makes this with both.
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        checkpoint_dir: Path,
        requested: Callable[[], bool],
        save: Callable[[], None],
        stop: Callable[[], None],
    ) -> None:
        config = tf.distribute.experimental.TerminationConfig(
            termination_watcher_fn=requested, exit_fn=stop, grace_period=0, save_fn=save
        )
        # save_fn does every save, so this manager never writes; its folder never exists,
        # so the handler restores nothing and its counter starts at 0 on every task.
        counter_only = tf.train.CheckpointManager(
            tf.train.Checkpoint(), str(checkpoint_dir / "unused"), max_to_keep=1
        )
        with _no_cloud_probe():
            self._handler = tf.distribute.experimental.PreemptionCheckpointHandler(
                strategy.cluster_resolver, counter_only, termination_config=config
            )

    def save_if_preempted(self) -> None:
        """Saves and stops, when the cluster agreed to stop after the step just trained."""
        self._handler.save_checkpoint_if_preempted()

    def close(self) -> None:
        """Ends the handler's threads now: TensorFlow ends them only in ``__del__``."""
        self._handler.__del__()


@contextlib.contextmanager
def _no_cloud_probe() -> Iterator[None]:
    """Points the handler's GCE metadata probe at a local port that refuses at once."""
    saved = os.environ.get(GCE_METADATA_ENV)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))  # bound but never listening: connections are refused
        os.environ[GCE_METADATA_ENV] = f"127.0.0.1:{closed.getsockname()[1]}"
        try:
            yield
        finally:
            if saved is None:
                del os.environ[GCE_METADATA_ENV]
            else:
                os.environ[GCE_METADATA_ENV] = saved
