"""Which examples an evaluation split holds out: the same for every source, the engine's
pipelines and an exported script alike.

numpy and ``split_counts`` only, so that "Export as script" copies this function's source
into the script: the script holds out the examples the engine holds out.
"""

from __future__ import annotations

import numpy as np

from ..config import split_counts


def held_out(examples: int, split: float, seed: int) -> np.ndarray:
    """Which of ``examples`` an evaluation split holds out: a seeded random choice, so the
    same project holds out the same examples in every run."""
    _, held_count = split_counts(examples, split)
    held = np.zeros(examples, dtype=bool)
    held[np.random.default_rng(seed).permutation(examples)[:held_count]] = True
    return held
