"""How the global batch, the per-replica batch and the rate relate when replicas change.

Distloop's batch is the global one (``data.global_batch_size``, the guide's
``GLOBAL_BATCH_SIZE``): every replica takes an equal share of it, and the loss is
averaged over it (``compute_average_loss``). So adding replicas with the same global
batch changes nothing about the optimisation, only how the work is split; keeping the
per-replica batch instead makes the global batch grow with the replicas, and then the
linear scaling rule (Goyal et al., 2017: "Accurate, Large Minibatch SGD") scales the
rate by the same factor, with a warm-up from the old rate, since the first steps of a
large rate diverge. Nothing here applies anything: the forms offer it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .config import StrategyConfig

WARMUP_EPOCHS = 5
"""Goyal et al.'s warm-up: the rate rises linearly to the scaled one over five epochs."""


def planned_replicas(
    strategy: Mapping[str, Any], tf_config: Mapping[str, Any] | None
) -> int | None:
    """Replicas the forms' strategy makes, where known before TensorFlow starts: one per
    device or CPU replica on one machine, one per worker (and chief) in a multi-worker
    cluster; None when only the devices found can tell (all GPUs, a TPU)."""
    try:
        config = StrategyConfig.model_validate(strategy)
    except ValidationError:
        return None
    if config.kind == "multi_worker_mirrored":
        cluster = (tf_config or {}).get("cluster") or {}
        workers = sum(len(cluster.get(role) or ()) for role in ("chief", "worker"))
        return workers or None
    return config.replica_count_hint()


@dataclass(frozen=True)
class Scaling:
    """The project's batch and rate as set for ``before`` replicas, now run on ``replicas``."""

    before: int
    replicas: int
    global_batch: int
    rate: float

    @property
    def factor(self) -> float:
        return self.replicas / self.before

    def relation(self) -> str:
        """What each replica takes of the global batch now, in one sentence."""
        share = self.global_batch / self.replicas
        each = f"{share:g}" if share == int(share) else f"{share:.1f} (uneven)"
        return (
            f"The global batch of {self.global_batch} is split over {self.replicas} "
            f"replica(s): {each} examples each; the loss is averaged over the global batch."
        )

    @property
    def scaled_batch(self) -> int:
        """The global batch that keeps each replica's share as it was."""
        return round(self.global_batch * self.factor)

    @property
    def scaled_rate(self) -> float:
        return float(f"{self.rate * self.factor:.6g}")

    def advice(self) -> str:
        """The two choices, said plainly: keep the global batch, or keep the per-replica
        batch and scale the rate linearly, with its warm-up."""
        was = self.global_batch / self.before
        return (
            f"Replicas changed from {self.before} to {self.replicas}. Keeping the global batch "
            f"of {self.global_batch} trains as before, each replica taking "
            f"{self.global_batch / self.replicas:g} instead of {was:g}. To keep {was:g} per "
            f"replica, the global batch becomes {self.scaled_batch} and the linear scaling "
            f"rule scales the rate by {self.factor:g}x, {self.rate:g} to {self.scaled_rate:g}, "
            f"which needs a warm-up: rising from {self.rate:g} over the first "
            f"{WARMUP_EPOCHS} epochs or so (Goyal et al.); without one, check the first "
            "steps do not diverge (Find Learning Rate... tells)."
        )
