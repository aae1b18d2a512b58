"""What every section of a project shares: the strict rules for each value, and the limits
that more than one section uses (a run's steps, a seed), kept equal in one place."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

MAX_STEPS = 1_000_000_000
"""The longest run, in steps: far past any real run, and inside a 32-bit progress counter."""
MAX_SEED = 2**31 - 1


class _Strict(BaseModel):
    """The project file's rules for every value, in one place.

    Unknown keys are errors, so a typo is not silently ignored. Numbers are strict
    (``true`` is not 1, ``"0.5"`` is not 0.5, though 1 is a float) and must be
    finite: NaN or Infinity in a setting only fails later, inside TensorFlow.
    """

    model_config = ConfigDict(
        extra="forbid", validate_assignment=True, strict=True, allow_inf_nan=False
    )
