"""The scaling rule under the optimizer: how the global and per-replica batch relate, and,
when the replicas changed, the linear-scaling offer, applied only when asked."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget

from ...engine.scaling_rule import Scaling


class ScalingNote(QWidget):
    """Shows a :class:`Scaling`; ``apply_requested(batch, rate)`` when the offer is taken."""

    apply_requested = Signal(int, float)

    def __init__(self) -> None:
        super().__init__()
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setStyleSheet("color: #555555;")
        self.apply = QPushButton()
        self.apply.setToolTip("Sets data.global_batch_size and the optimizer's learning rate")
        self.apply.clicked.connect(self._apply)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text)
        layout.addWidget(self.apply)
        self._scaling: Scaling | None = None
        self.show_scaling(None)

    def show_scaling(self, scaling: Scaling | None) -> None:
        """``scaling`` said (its offer too when the replicas changed); nothing for None."""
        self._scaling = scaling
        self.text.setVisible(scaling is not None)
        changed = scaling is not None and scaling.before != scaling.replicas
        self.apply.setVisible(changed)
        if scaling is None:
            return
        self.text.setText(scaling.relation() + (f"\n{scaling.advice()}" if changed else ""))
        if changed:
            self.apply.setText(
                f"Use global batch {scaling.scaled_batch} and rate {scaling.scaled_rate:g}"
            )

    def _apply(self) -> None:
        if self._scaling is not None:
            self.apply_requested.emit(self._scaling.scaled_batch, self._scaling.scaled_rate)
