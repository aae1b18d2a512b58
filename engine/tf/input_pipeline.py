"""How each step's global batch reaches the replicas (imports TensorFlow).

Two ways, chosen by ``training.input_distribution``:

- ``distributed_dataset``: the guide's ``strategy.experimental_distribute_dataset``.
  TensorFlow splits every global batch and prefetches each replica's share to its
  device through a multi-device iterator, so on GPUs and TPUs the copies overlap
  the step. On CPUs that iterator is pure cost: about 0.35 ms a step here, which
  capped a fused loop of the seed model at ~2,000 steps/s.
- ``split_on_host``: one ordinary iterator over the global batches; inside the step
  function each replica takes its slice of the batch
  (``experimental_distribute_values_from_function``). The same fused loop runs
  ~6,000 steps/s (benchmarks/RESULTS.md).

The slices are the ones TensorFlow's distributed dataset cuts: a batch of ``b``
examples gives every replica ``ceil(b / N)`` of them in replica order, so the
last replicas get fewer (or none, for a short last batch). Replicas therefore see
the same examples, and report the same per-replica losses, either way. A
multi-worker run reads the whole global batch on every worker, and each worker
keeps only its replicas' slices (replica ids are cluster-wide), as DATA
autosharding does.

``auto`` splits on the host when every replica is a CPU and distributes the
dataset otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from ..config import InputDistribution
from .strategy import replica_devices


@dataclass(frozen=True)
class ReplicaInput:
    """What the loop iterates, and how the step function turns an element into replica inputs.

    ``to_replicas`` runs inside the step's ``tf.function``, on the element the
    loop took from ``dataset``.
    """

    dataset: Any
    to_replicas: Callable[[Any], Any]
    method: InputDistribution
    """``split_on_host`` or ``distributed_dataset``: what ``auto`` resolved to."""

    @property
    def element_spec(self) -> Any:
        return self.dataset.element_spec


def resolve_input_distribution(
    strategy: tf.distribute.Strategy, choice: InputDistribution
) -> InputDistribution:
    """``auto`` becomes ``split_on_host`` when every replica runs on a CPU."""
    if choice != "auto":
        return choice
    devices = replica_devices(strategy) or ["/cpu:0"]
    on_cpus = all(tf.DeviceSpec.from_string(device).device_type == "CPU" for device in devices)
    return "split_on_host" if on_cpus else "distributed_dataset"


def distribute_input(
    strategy: tf.distribute.Strategy, dataset: tf.data.Dataset, choice: InputDistribution
) -> ReplicaInput:
    """The run's global batches, ready for ``strategy.run`` the way ``choice`` says."""
    if resolve_input_distribution(strategy, choice) == "distributed_dataset":
        return ReplicaInput(
            strategy.experimental_distribute_dataset(dataset),
            lambda element: element,
            "distributed_dataset",
        )

    def to_replicas(batch: Any) -> Any:
        if strategy.num_replicas_in_sync == 1:
            return batch
        return strategy.experimental_distribute_values_from_function(
            lambda context: tf.nest.map_structure(
                lambda tensor: replica_slice(
                    tensor, context.replica_id_in_sync_group, context.num_replicas_in_sync
                ),
                batch,
            )
        )

    return ReplicaInput(dataset, to_replicas, "split_on_host")


def replica_slice(batch: tf.Tensor, replica: int, replicas: int) -> tf.Tensor:
    """Replica ``replica``'s share of ``batch``: ``ceil(b / replicas)`` examples, in order."""
    size = tf.shape(batch, out_type=tf.int64)[0]
    share = (size + replicas - 1) // replicas
    start = tf.minimum(replica * share, size)
    return batch[start : tf.minimum(start + share, size)]
