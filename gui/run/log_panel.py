"""The log: the engine's notes and TensorFlow's own output, one coloured line each.

TensorFlow opens every engine with a banner (oneDNN, CUDA probing, CPU features)
that says nothing about the run and pushed its first real lines out of sight; the
panel hides it until asked (one click) and keeps it, so showing it loses nothing.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from PySide6.QtGui import (
    QAction,
    QColor,
    QFontDatabase,
    QTextCharFormat,
    QTextCursor,
    QTextOption,
)
from PySide6.QtWidgets import (
    QCheckBox,
    QHBoxLayout,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from ...engine.formatting import format_duration
from ...engine.run_events import (
    Evaluated,
    Logged,
    RunEvent,
    RunFailure,
    RunOutcome,
    Started,
    StatusChanged,
)
from ...engine.run_folder import format_loss
from ...engine.run_model import RunModel

MAX_LINES = 10_000
LEVEL_COLORS = {
    "debug": QColor("#808080"),
    "info": QColor("#202020"),
    "warning": QColor("#b26a00"),
    "error": QColor("#c62828"),
}
SOURCE_TAGS = {"engine": "engine", "tensorflow": "tf", "gui": "gui"}
STARTUP_TOGGLE = "Show TensorFlow start-up messages"


@dataclass(frozen=True)
class _Line:
    text: str  # with its time, level and source prefix
    level: str
    startup: bool


class LogPanel(QWidget):
    """Keeps the last :data:`MAX_LINES` lines; follows new lines unless scrolled up.

    A start-up line is TensorFlow's own (not a warning or error) from before the
    run's RunStarted: :meth:`run_starting` opens that window, :meth:`run_started`
    closes it. Lines are kept apart from the document so the toggle can redraw it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lines: deque[_Line] = deque()
        self._startup_lines = 0  # of those kept
        self._starting = True  # before any run: an engine probing devices says the same
        self.text = QPlainTextEdit()
        self.text.setReadOnly(True)
        self.text.setMaximumBlockCount(MAX_LINES)
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        # A path or a TensorFlow op name has no spaces: break it anywhere rather than clip it.
        self.text.setWordWrapMode(QTextOption.WrapMode.WrapAtWordBoundaryOrAnywhere)
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setPlaceholderText("Engine and TensorFlow messages appear here.")
        self.clear_action = QAction("&Clear Log", self)
        self.clear_action.triggered.connect(self.clear)
        self.startup_checkbox = QCheckBox(STARTUP_TOGGLE)
        self.startup_checkbox.setToolTip(
            "TensorFlow's banner as an engine starts (oneDNN, CUDA, CPU features): "
            "hidden unless checked; its warnings and errors are always shown"
        )
        self.startup_checkbox.toggled.connect(lambda _on: self._redraw())
        clear = QPushButton("Clear log")
        clear.clicked.connect(self.clear)
        buttons = QHBoxLayout()
        buttons.addWidget(self.startup_checkbox)
        buttons.addStretch(1)
        buttons.addWidget(clear)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.text, 1)
        layout.addLayout(buttons)

    def run_starting(self) -> None:
        """A run's engine is starting: TensorFlow's info lines are its banner until it runs."""
        self._starting = True

    def run_started(self) -> None:
        self._starting = False

    def show_change(self, model: RunModel, event: RunEvent) -> None:
        """A line for what the run reports, and its engine's own lines."""
        match event:
            case Logged() as line:
                self.add_message(line)
            case Started() as message:
                self.run_started()
                devices = ", ".join(message.devices)
                self.add(
                    f"{message.strategy_kind or message.strategy} with {message.num_replicas} "
                    f"replica(s) on {devices} ({message.strategy}, "
                    f"TensorFlow {message.tensorflow_version})"
                )
                # message.warnings are not added: the engine logged each as a warning line
                # just before (every task's, in a cluster), and the window showed them twice.
            case Evaluated() as message:
                values = ", ".join(f"{name}={value:.6g}" for name, value in message.metrics.items())
                self.add(
                    f"evaluation after step {message.step} on {message.examples} examples: {values}"
                )
            case StatusChanged(outcome=RunOutcome(failure=None) as ended):
                loss = (
                    ""
                    if ended.final_loss is None
                    else f", final loss {format_loss(ended.final_loss)}"
                )
                how = " (killed on request)" if ended.killed else ""
                took = format_duration(ended.elapsed_s or 0.0)
                at = f"at step {ended.last_step} after {took}{loss}"
                self.add(f"run {ended.status}{how} {at}")
            case StatusChanged(outcome=RunOutcome(failure=RunFailure() as failed)):
                self.add(f"{failed.error_type}: {failed.message}", "error")
                if failed.traceback and not failed.known:  # a known one's is in engine.log
                    self.add(failed.traceback, "error")

    def add_message(self, message: Logged) -> None:
        source = SOURCE_TAGS.get(message.source, message.source)
        task = f" {message.task}" if message.task else ""
        startup = (
            self._starting and message.source == "tensorflow" and message.level in ("debug", "info")
        )
        self.add(message.text, message.level, f"{source}{task}", startup=startup)

    def add(
        self, text: str, level: str = "info", source: str = "gui", *, startup: bool = False
    ) -> None:
        """Appends ``text`` (each of its lines) with a time, level and source prefix."""
        stamp = time.strftime("%H:%M:%S")
        lines = [
            _Line(f"{stamp} {level.upper():<7} [{source}] {line}", level, startup)
            for line in text.splitlines() or [""]
        ]
        self._lines.extend(lines)
        self._startup_lines += sum(line.startup for line in lines)
        while len(self._lines) > MAX_LINES:
            self._startup_lines -= self._lines.popleft().startup
        self._insert([line for line in lines if self._shown(line)])
        if any(line.startup for line in lines):
            self._update_toggle()

    def clear(self) -> None:
        self._lines.clear()
        self._startup_lines = 0
        self.text.clear()
        self._update_toggle()

    def lines(self) -> list[str]:
        """The lines shown now."""
        return self.text.toPlainText().splitlines()

    def hidden_lines(self) -> int:
        return 0 if self.startup_checkbox.isChecked() else self._startup_lines

    def _shown(self, line: _Line) -> bool:
        return not line.startup or self.startup_checkbox.isChecked()

    def _insert(self, lines: list[_Line]) -> None:
        bar = self.text.verticalScrollBar()
        following = bar.value() >= bar.maximum() - 2
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        for line in lines:
            char_format = QTextCharFormat()
            char_format.setForeground(LEVEL_COLORS.get(line.level, LEVEL_COLORS["info"]))
            if not self.text.document().isEmpty():
                cursor.insertBlock()
            cursor.insertText(line.text, char_format)
        if following:
            bar.setValue(bar.maximum())

    def _redraw(self) -> None:
        self.text.clear()
        self._insert([line for line in self._lines if self._shown(line)])
        self._update_toggle()

    def _update_toggle(self) -> None:
        hidden = self.hidden_lines()
        self.startup_checkbox.setText(
            f"{STARTUP_TOGGLE} ({hidden} hidden)" if hidden else STARTUP_TOGGLE
        )
