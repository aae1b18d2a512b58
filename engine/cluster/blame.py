"""Which task of a failed cluster run to name (TensorFlow-free).

When one task of a synchronous cluster goes wrong, its peers fail too, often first,
with communication errors: those are consequences. A task that died is to blame
before them. A task that stalls (stopped with SIGSTOP, hung, its machine frozen)
neither dies nor fails: its peers' collectives are aborted once the cluster's
coordination service misses its heartbeats, and the healthy task that reported that
was blamed, in a 100-line TensorFlow error in which the stalled task appeared only
deep inside (``The following tasks are unhealthy (stopped sending heartbeats):
/job:worker/replica:0/task:1``). Here that task is named in one line instead.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from pathlib import Path

from ..messages import RunFailed

PEER_ERRORS = ("UnavailableError", "DeadlineExceededError", "CancelledError", "AbortedError")
"""TensorFlow's errors for a peer that went away or stopped answering."""
STALLED = "TaskStalled"
"""The error type of a task named as stalled by its peers' errors."""
STALLED_MESSAGE = (
    "stopped responding: it sent the cluster no heartbeat (a stopped or hung process, "
    "or its machine), so the other tasks could not go on"
)
_UNHEALTHY = re.compile(
    r"stopped sending heartbeats\):\s*((?:/job:[\w-]+/replica:\d+/task:\d+[\s,]*)+)"
)
_TASK = re.compile(r"/job:([\w-]+)/replica:\d+/task:(\d+)")


def unresponsive_tasks(text: str) -> list[str]:
    """The tasks (``worker:1``) a TensorFlow error names as no longer sending heartbeats."""
    found: list[str] = []
    for listed in _UNHEALTHY.findall(text):
        found += [f"{job}:{index}" for job, index in _TASK.findall(listed)]
    return list(dict.fromkeys(found))


def stopped_tasks(pids: Mapping[str, int | None]) -> list[str]:
    """The tasks whose process on this machine is stopped (SIGSTOP, a debugger)."""
    found = []
    for task, pid in pids.items():
        try:
            stat = Path(f"/proc/{pid}/stat").read_text() if pid else ""
        except OSError:  # gone, or no /proc here
            continue
        state = stat.rpartition(")")[2].split()[:1]
        if state in (["T"], ["t"]):
            found.append(task)
    return found


def cause(
    failures: list[RunFailed], tasks: Collection[str], stopped: Collection[str] = ()
) -> RunFailed:
    """The failure to blame among ``failures`` (at least one) of a cluster of ``tasks``.

    A task that died comes first, unless another task's process is ``stopped``: a
    stopped process neither dies nor fails, and a peer that died meanwhile is its
    consequence (TensorFlow can abort a task whose collective waits on missed
    heartbeats: SIGABRT, seen on a loaded machine, where the healthy worker was named).
    Then a task of this cluster that its peers' errors name as unresponsive, or whose
    process is ``stopped`` while a peer's collective failed or the peer died (a
    collective's deadline can fire before the missed heartbeats are noticed, and then
    names nobody), as a :data:`STALLED` failure of that task, the peer's error kept as
    its traceback, for the log; then a task that failed on its own (not with a
    communication error); then the first failure.
    """
    died = [f for f in failures if f.error_type == "EngineDied"]
    frozen = [task for task in stopped if task in tasks and all(task != f.task for f in died)]
    if died and not frozen:
        return died[0]
    for failure in failures:
        named = unresponsive_tasks(f"{failure.message}\n{failure.traceback}")
        if failure.error_type in (*PEER_ERRORS, "EngineDied"):
            named += list(stopped)
        stalled = [task for task in named if task in tasks and task != failure.task]
        if stalled:
            return RunFailed(
                error_type=STALLED,
                message=STALLED_MESSAGE,
                traceback=f"{failure.task}: {failure.error_type}: {failure.message}\n"
                f"{failure.traceback}",
                last_step=failure.last_step,
                task=stalled[0],
                known=True,  # the line says it all; TensorFlow's error goes to the log
            )
    own = [f for f in failures if f.error_type not in PEER_ERRORS]
    return (own or failures)[0]
