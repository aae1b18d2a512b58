"""Whether a multi-worker cluster's workers run on the same devices (TensorFlow-free).

``MultiWorkerMirroredStrategy`` assumes every worker has as many devices of one kind
as the others: a worker with one GPU beside workers with two (or with none) makes the
first collective wait for ever. Each task says its devices as soon as its strategy
exists (``messages.StrategyReady``), before that collective; the launcher compares
them here and stops the cluster in one line instead.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

DEVICES_DIFFER = "DevicesDiffer"
"""The error type of a worker whose devices are not its peers'."""
_KIND = re.compile(r"device:([A-Za-z_]+):\d+$")


def devices_text(devices: list[str]) -> str:
    """``2 GPU``, ``1 CPU``: how many devices of each kind, as a line says them."""
    kinds = Counter(_kind(device) for device in devices)
    return " + ".join(f"{count} {kind}" for kind, count in sorted(kinds.items())) or "none"


def _kind(device: str) -> str:
    found = _KIND.search(device)
    return found[1].upper() if found else device


def odd_worker(reported: Mapping[str, list[str]], chief: str) -> tuple[str, str] | None:
    """The first task whose devices differ from most workers' (the chief's on a tie), and
    the task whose devices are those; None when every task has the same."""
    seen = {task: devices_text(devices) for task, devices in reported.items()}
    if len(set(seen.values())) < 2:
        return None
    counts = Counter(seen.values())
    ours = seen.get(chief)
    common = ours if ours and counts[ours] == max(counts.values()) else counts.most_common(1)[0][0]
    odd = next(task for task, text in seen.items() if text != common)
    return odd, next(task for task, text in seen.items() if text == common)
