"""The ``strategy`` section: which ``tf.distribute`` strategy runs the loop, on which devices,
and device names read as TensorFlow reads them (without TensorFlow)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from ..problems import Problem
from ._strict import _Strict

StrategyKind = Literal[
    "default", "one_device", "mirrored", "multi_worker_mirrored", "parameter_server", "tpu"
]
STRATEGY_KINDS: tuple[str, ...] = StrategyKind.__args__  # type: ignore[attr-defined]


class StrategyConfig(_Strict):
    """Which ``tf.distribute`` strategy runs the loop, and on which devices."""

    kind: StrategyKind = "mirrored"
    devices: list[str] | None = Field(
        None,
        description="Devices to mirror over, e.g. ['/gpu:0', '/gpu:1']; all GPUs (or the CPU) "
        "when omitted.",
    )
    cpu_replicas: int = Field(
        1,
        ge=1,
        le=64,
        description="Split the CPU into this many logical devices and mirror over them, so a "
        "machine without GPUs runs real multi-replica training.",
    )
    cross_device_ops: Literal["auto", "nccl", "hierarchical_copy", "reduce_to_one_device"] = "auto"
    communication: Literal["auto", "ring", "nccl"] = "auto"
    communication_timeout_s: float | None = Field(
        None,
        gt=0,
        le=1_000_000,
        description="Multi-worker collectives give up after this long, so a stalled worker "
        "fails the run instead of hanging it.",
    )
    tpu: str | None = Field(None, description="TPU name or grpc:// address for TPUStrategy.")

    def replica_count_hint(self) -> int | None:
        """Replicas known before TensorFlow starts; None when only the devices found can tell."""
        if self.kind in ("default", "one_device"):
            return 1
        if self.kind == "mirrored":
            if self.devices:
                return len(self.devices)
            if self.cpu_replicas > 1:
                return self.cpu_replicas
        return None

    def problems(self) -> list[Problem]:
        problems = []
        if self.cpu_replicas > 1 and self.kind != "mirrored":
            problems.append(
                Problem(
                    ("cpu_replicas",), f"cpu_replicas applies only to mirrored, not {self.kind}"
                )
            )
        if self.cpu_replicas > 1 and self.devices:
            problems.append(Problem(("devices",), "give either devices or cpu_replicas, not both"))
        if self.devices is not None:
            canonical = []
            for i, device in enumerate(self.devices):
                try:
                    canonical.append(canonical_device(device))
                except ValueError as exc:
                    problems.append(Problem(("devices", i), str(exc)))
            if self.kind not in ("mirrored", "one_device"):
                problems.append(
                    Problem(
                        ("devices",), f"devices apply to mirrored and one_device, not {self.kind}"
                    )
                )
            elif self.kind == "one_device" and len(self.devices) != 1:
                problems.append(Problem(("devices",), "one_device takes exactly one device"))
            elif not self.devices:
                problems.append(Problem(("devices",), "the list is empty; omit it to use all"))
            if len(set(canonical)) != len(canonical):
                problems.append(Problem(("devices",), "a device is listed twice"))
        if self.cross_device_ops != "auto" and self.kind != "mirrored":
            problems.append(
                Problem(("cross_device_ops",), f"applies only to mirrored, not {self.kind}")
            )
        if self.communication != "auto" and self.kind != "multi_worker_mirrored":
            problems.append(Problem(("communication",), "applies only to multi_worker_mirrored"))
        if self.kind == "tpu" and not self.tpu:
            problems.append(Problem(("tpu",), "tpu needs the TPU's name or address"))
        if self.tpu and self.kind != "tpu":
            problems.append(
                Problem(("tpu",), f"a TPU address is only used by tpu, not {self.kind}")
            )
        return [Problem(("strategy", *p.loc), p.message) for p in problems]


_DEVICE_TYPES = ("CPU", "GPU", "TPU")
_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_INDEX = re.compile(r"0|[1-9][0-9]{0,8}")


def canonical_device(text: str) -> str:
    """A device name as TensorFlow parses it (``/gpu:0``, ``GPU:0``, ``/device:GPU:0``,
    ``/job:worker/replica:0/task:1/device:CPU:0``), in its canonical spelling.

    The rules are ``tf.DeviceSpec``'s, read without TensorFlow, and stricter where
    TensorFlow parses a name it then cannot place: the device type must be CPU, GPU
    or TPU and every index a plain number. Whether the device exists is only known
    on the machine that runs the project.
    """
    hint = "write e.g. /gpu:0, /cpu:0 or /job:worker/task:1/device:GPU:0"
    if not isinstance(text, str) or not text.strip() or text != text.strip():
        raise ValueError(f"{text!r} is not a TensorFlow device; {hint}")
    found: dict[str, str] = {}
    for part in filter(None, text.split("/")):
        fields = part.split(":")
        if len(fields) == 2 and fields[0] in ("job", "replica", "task"):
            key, value = fields
            pattern = _JOB_NAME if key == "job" else _INDEX
            if not pattern.fullmatch(value):
                raise ValueError(f"{text!r}: {value!r} is not a valid {key} in a device name")
        elif len(fields) in (1, 2) and fields[0].upper() in _DEVICE_TYPES:
            key, value = "device", ":".join([fields[0].upper(), *fields[1:]])
        elif len(fields) == 3 and fields[0] == "device" and fields[1].upper() in _DEVICE_TYPES:
            key, value = "device", f"{fields[1].upper()}:{fields[2]}"
        else:
            raise ValueError(f"{text!r} is not a TensorFlow device; {hint}")
        if key in found:
            raise ValueError(f"{text!r} names its {key} twice; a device name has one of each")
        found[key] = value
    if "device" not in found:
        raise ValueError(f"{text!r} names no device type (CPU, GPU or TPU); {hint}")
    device_type, _, index = found["device"].partition(":")
    index = index or "0"
    if not _INDEX.fullmatch(index):
        raise ValueError(f"{text!r}: device index {index!r} is not a plain number")
    prefix = "".join(f"/{key}:{found[key]}" for key in ("job", "replica", "task") if key in found)
    return f"{prefix}/device:{device_type}:{index}"
