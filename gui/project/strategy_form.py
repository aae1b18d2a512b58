"""The strategy settings, and the "Detect devices" probe that tells what this machine has."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QSignalBlocker, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.cluster_layout import DEFAULT_COMMUNICATION_TIMEOUT_S
from ...engine.config import StrategyConfig
from ...engine.config.applicability import applicable_fields
from ...engine.devices import DetectedDevices, detect_devices
from ...engine.problems import Loc
from .auto_form import AutoForm

DETECT_TIMEOUT_S = 120.0

# What each kind builds, in the guide's words (section 3), shown under the choice.
KIND_NOTES: dict[str, str] = {
    "default": "The default strategy: no distribution, the loop runs as plain TensorFlow.",
    "one_device": "OneDeviceStrategy: everything on one device you name (or the first GPU/CPU).",
    "mirrored": "MirroredStrategy: one machine, several devices, synchronous; variables are "
    "mirrored and gradients all-reduced.",
    "multi_worker_mirrored": "MultiWorkerMirroredStrategy: several machines, synchronous. "
    "Needs a TF_CONFIG for each task.",
    "parameter_server": "ParameterServerStrategy: asynchronous training with ps tasks, "
    "driven by a ClusterCoordinator. Needs a TF_CONFIG with a chief, workers and ps.",
    "tpu": "TPUStrategy: runs on the TPU you name (name or grpc:// address).",
}


# What an empty Devices field means, per kind that takes devices.
DEVICES_HINTS = {
    "mirrored": "all GPUs (or the CPU), e.g. /gpu:0, /gpu:1",
    "one_device": "the first GPU (or the CPU), e.g. /gpu:1",
}


def logical_device(physical_name: str) -> str:
    """``/physical_device:GPU:0`` → ``/gpu:0``: the name the strategy's devices take."""
    return "/" + physical_name.removeprefix("/physical_device:").lower()


class StrategyForm(QWidget):
    """Edits ``strategy``; ``devices_detected`` reports what a probe found (and TF's version)."""

    edited = Signal()
    kind_changed = Signal(str)
    devices_detected = Signal(object)

    def __init__(self, detect: Callable[[float], DetectedDevices] = detect_devices) -> None:
        super().__init__()
        self._detect = detect
        self._detect_task: asyncio.Task[None] | None = None
        self.fields = AutoForm(
            StrategyConfig,
            list(StrategyConfig.model_fields),
            labels={"cpu_replicas": "CPU replicas:", "tpu": "TPU:"},
            initial={"communication_timeout_s": DEFAULT_COMMUNICATION_TIMEOUT_S},
        )
        self.kind_note = QLabel()
        self.kind_note.setWordWrap(True)
        self.kind_note.setStyleSheet("color: #555555;")

        self.detect_button = QPushButton("Detect devices")
        self.detect_button.setToolTip(
            "Starts TensorFlow in a separate process and lists the devices it sees here."
        )
        self.detect_button.clicked.connect(self.start_detection)
        self.detect_status = QLabel("Not detected yet.")
        self.detect_status.setWordWrap(True)
        self.device_list = QListWidget()
        self.device_list.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.device_list.setMaximumHeight(110)
        self.device_list.itemDoubleClicked.connect(lambda _item: self.use_selected_devices())
        self.use_button = QPushButton("Use selected")
        self.use_button.setToolTip("Put the selected devices in the Devices field.")
        self.use_button.setEnabled(False)
        self.use_button.clicked.connect(self.use_selected_devices)
        self.device_list.itemSelectionChanged.connect(
            lambda: self.use_button.setEnabled(bool(self.device_list.selectedItems()))
        )

        probe = QGroupBox("Devices on this machine")
        buttons = QHBoxLayout()
        buttons.addWidget(self.detect_button)
        buttons.addWidget(self.use_button)
        buttons.addStretch(1)
        probe_layout = QVBoxLayout(probe)
        probe_layout.addLayout(buttons)
        probe_layout.addWidget(self.detect_status)
        probe_layout.addWidget(self.device_list)

        layout = QVBoxLayout(self)
        layout.addWidget(self.fields)
        layout.addWidget(self.kind_note)
        layout.addWidget(probe)
        layout.addStretch(1)

        self.fields.editors["kind"].edited.connect(self._drop_inapplicable)
        self.fields.edited.connect(self.edited)
        self.fields.edited.connect(self._refresh)
        self.fields.editors["kind"].edited.connect(
            lambda: self.kind_changed.emit(self.fields.editors["kind"].value())
        )
        self._refresh()

    def value(self) -> dict[str, Any]:
        return self.fields.value()

    def set_value(self, strategy: StrategyConfig) -> None:
        with QSignalBlocker(self):
            self.fields.set_value(strategy)
        self._refresh()

    def targets(self) -> dict[Loc, QWidget]:
        return {("strategy", name): editor for name, editor in self.fields.editors.items()}

    def _drop_inapplicable(self) -> None:
        """A kind the user picks gets the defaults of the settings it does not take:
        mirrored's cpu_replicas 2 kept under multi_worker_mirrored blocked Run until the
        user found the greyed-out field."""
        used = applicable_fields(StrategyConfig, self.fields.editors["kind"].value())
        for name, editor in self.fields.editors.items():
            if name not in used and editor.value() != StrategyConfig.model_fields[name].default:
                editor.set_value(StrategyConfig.model_fields[name].default)

    def _refresh(self) -> None:
        kind = self.fields.editors["kind"].value()
        self.fields.enable_applicable(applicable_fields(StrategyConfig, kind))
        self.kind_note.setText(KIND_NOTES.get(kind, ""))
        self.fields.editors["devices"].setPlaceholderText(DEVICES_HINTS.get(kind, ""))

    # --- device detection ---------------------------------------------------------------

    def start_detection(self) -> None:
        """Probes devices in the background; the window stays usable while TF starts."""
        if self._detect_task is not None and not self._detect_task.done():
            return
        self.detect_button.setEnabled(False)
        self.detect_status.setText("Detecting… (TensorFlow starts in a separate process)")
        self._detect_task = asyncio.get_running_loop().create_task(self._run_detection())

    def detection_running(self) -> bool:
        return self._detect_task is not None and not self._detect_task.done()

    async def _run_detection(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(None, self._detect, DETECT_TIMEOUT_S)
        except (TimeoutError, RuntimeError, OSError, ValueError) as exc:
            self.detect_status.setText(
                f"<span style='color:#c62828'>Detection failed: {exc}</span>"
            )
        else:
            self.show_devices(found)
            self.devices_detected.emit(found)
        finally:
            self.detect_button.setEnabled(True)

    def show_devices(self, found: DetectedDevices) -> None:
        self.device_list.clear()
        for device in found.devices:
            item = QListWidgetItem(f"{device.device_type:<4}  {device.name}")
            item.setData(Qt.ItemDataRole.UserRole, logical_device(device.name))
            item.setToolTip(f"Use as {logical_device(device.name)}")
            self.device_list.addItem(item)
        counts: dict[str, int] = {}
        for device in found.devices:
            counts[device.device_type] = counts.get(device.device_type, 0) + 1
        summary = ", ".join(f"{n} {kind}" for kind, n in counts.items()) or "no devices"
        self.detect_status.setText(f"TensorFlow {found.tensorflow_version} sees {summary}.")

    def use_selected_devices(self) -> None:
        names = [item.data(Qt.ItemDataRole.UserRole) for item in self.device_list.selectedItems()]
        if names:
            self.fields.editors["devices"].set_value(names)
