"""Cluster projects for tests (a multi-worker project of the synthetic data) and what
their runs print and open: step lines, listening ports."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path

import numpy as np

from .distloop_testing import synthetic_project


def multi_worker(steps: int = 20, tf_config: dict | None = None) -> dict:
    data = synthetic_project(1, steps=steps)
    data["name"] = "cluster test"
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = tf_config
    return data


def step_lines(text: str) -> tuple[list[int], np.ndarray]:
    found = STEP_LINE.findall(text)
    return [int(s) for s, _ in found], np.array([float(v) for _, v in found], np.float32)


def listening_ports(net: Path) -> set[int]:
    """The TCP ports in LISTEN state in a network namespace, from its /proc/.../net folder."""
    ports = set()
    for name in ("tcp", "tcp6"):
        with contextlib.suppress(FileNotFoundError):
            for line in (net / name).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A":
                    ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


STEP_LINE = re.compile(r"^step=(\d+) loss=(\S+)$", re.MULTILINE)
