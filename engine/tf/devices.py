"""The device probe's TensorFlow half: which CPUs, GPUs and TPUs TensorFlow sees here.

:func:`distloop.engine.child_main.detect_devices_main` runs it in a process of its
own, so asking costs the window and ``distloop devices`` no TensorFlow import.
"""

from __future__ import annotations

import tensorflow as tf

from ..messages import DeviceInfo, DevicesDetected


def detect_devices() -> DevicesDetected:
    """The physical devices as TensorFlow lists them, before any run has configured them."""
    devices = [
        DeviceInfo(name=device.name, device_type=device.device_type)
        for device in tf.config.list_physical_devices()
    ]
    return DevicesDetected(devices=devices, tensorflow_version=tf.__version__)
