"""A task whose software is not the chief's, named in one line (TF-free).

Version skew is the usual cause of a cluster that works on one worker and fails on
another, so every launcher compares each task's :class:`EnvironmentReady` (sent as it
starts, before TensorFlow loads) with the chief's: a local cluster and an SSH launch
in their supervisor, a Slurm job in its follower, which reads every task's messages.
A warning, not a failure: a differing package may well be harmless (a launch's
pre-flight stops for the packages a run loads).
"""

from __future__ import annotations

from ..messages import EnvironmentReady
from ..run_environment import software_changes
from ..run_folder import ENVIRONMENT_FILE

CHANGES_SHOWN = 8
"""How many differing packages a task's line names; the task folders' files list them all."""


def same_environment(one: EnvironmentReady, other: EnvironmentReady) -> bool:
    return one.digest == other.digest and one.variables == other.variables


def environment_warning(
    task: str, theirs: EnvironmentReady, chief: str, chiefs: EnvironmentReady
) -> str | None:
    """``task``'s differences from ``chief``'s environment in one line; None when equal."""
    if same_environment(theirs, chiefs):
        return None
    changes = software_changes(theirs.software, chiefs.software, chief) + (
        software_changes(theirs.variables, chiefs.variables, chief, joiner="=")
    )
    more = len(changes) - CHANGES_SHOWN
    return (
        f"{task}'s environment differs from {chief}'s: {'; '.join(changes[:CHANGES_SHOWN])}"
        + (f" and {more} more" if more > 0 else "")
        + f" (each task's {ENVIRONMENT_FILE} has it whole)"
    )
