"""What devices this machine has, as TensorFlow sees them (TF-free).

TensorFlow is asked in a short-lived engine process (``engine.process.detect_devices``),
so the window and the command line never load it; its answer arrives as a protocol
message, and this module hands it on as a plain value: the window's forms, the project's
validation and ``distloop devices`` read names and types, never the wire.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Device:
    """One physical device: ``/physical_device:GPU:0`` of type ``GPU``."""

    name: str
    device_type: str


@dataclass(frozen=True)
class DetectedDevices:
    """The devices TensorFlow sees on this machine, and which TensorFlow it is."""

    devices: tuple[Device, ...]
    tensorflow_version: str


def detect_devices(timeout_s: float = 60.0) -> DetectedDevices:
    """Asks a short-lived engine process which devices TensorFlow sees (blocking).

    Raises TimeoutError when it does not answer within ``timeout_s``, RuntimeError when
    the probe failed.
    """
    from .process import detect_devices as probe  # the process machinery, only when asked

    found = probe(timeout_s)
    devices = tuple(Device(device.name, device.device_type) for device in found.devices)
    return DetectedDevices(devices, found.tensorflow_version)
