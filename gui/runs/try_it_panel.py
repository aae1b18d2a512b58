"""The "Try it" panel of a past run: its saved model on dropped files or a pasted row.

The model runs in a process of its own (``engine.prediction.PredictionProcess``:
TensorFlow never loads in the window), started when the panel opens and kept while it
is open, so TensorFlow and the model load once, while the user picks the first files,
and every later prediction is answered in a fraction of a second. Predictions are
awaited in a worker thread through asyncio, so the window stays responsive. Closing
the panel ends the process; one that died is started again by the next prediction.
A classifier's confusion matrix on the validation data (``confusion.json``, written
by the engine) is shown below, as a table whose cells shade with their share of the
true class's row.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QCloseEvent, QColor, QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from ...engine.prediction import (
    Prediction,
    PredictionError,
    PredictionProcess,
    PredictionResult,
)
from ...engine.run_folder import read_confusion, read_model_record
from ..files import file_dialogs
from ..widgets.close_keys import close_button

Predictor = Callable[[Path, Sequence[Path], Sequence[str]], PredictionResult]
SHOWN_CLASSES = 3
"""Classes listed per example: the top one and its runners-up."""
ERROR_STYLE = "color:#c62828"
INPUT_FILTER = "Examples (*.csv *.npy *.png *.jpg *.jpeg *.gif *.bmp *.txt);;All files (*)"


class DropArea(QFrame):
    """Takes dropped files (images, texts, CSVs, .npy arrays) and hands their paths on."""

    def __init__(self, on_files: Callable[[list[Path]], None]) -> None:
        super().__init__()
        self._on_files = on_files
        self.setAcceptDrops(True)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setMinimumHeight(64)
        label = QLabel("Drop images, texts, CSV files or .npy arrays here")
        label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        label.setStyleSheet("color:#555")
        layout = QVBoxLayout(self)
        layout.addWidget(label)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if any(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:
        paths = [Path(url.toLocalFile()) for url in event.mimeData().urls() if url.isLocalFile()]
        if paths:
            event.acceptProposedAction()
            self._on_files(paths)


class ConfusionTable(QTableWidget):
    """A confusion matrix: rows are true classes, columns predicted ones, shaded by share."""

    def show_report(self, report: dict[str, Any]) -> None:
        classes = [str(name) for name in report["classes"]]
        matrix = report["matrix"]
        self.clear()
        self.setRowCount(len(classes))
        self.setColumnCount(len(classes))
        self.setHorizontalHeaderLabels(classes)
        self.setVerticalHeaderLabels(classes)
        for row, counts in enumerate(matrix):
            total = sum(counts) or 1
            for column, count in enumerate(counts):
                item = QTableWidgetItem(str(count))
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                share = count / total
                hue = (46, 125, 50) if row == column else (198, 40, 40)
                alpha = round(40 + 180 * share) if count else 0
                item.setBackground(QBrush(QColor(*hue, alpha)))
                item.setToolTip(f"true {classes[row]}, predicted {classes[column]}: {count}")
                self.setItem(row, column, item)
        self.resizeColumnsToContents()


class TryItPanel(QWidget):
    """One run's model to try: files dropped or chosen, a CSV row pasted, predictions shown."""

    def __init__(
        self,
        run_dir: Path,
        title: str,
        predictor: Predictor | None = None,
        parent: QWidget | None = None,
    ) -> None:
        """``predictor``: what answers predictions; by default the run's model in a
        prediction process of the panel's own, started now."""
        super().__init__(parent)
        self.run_dir = run_dir
        self.process: PredictionProcess | None = None
        if predictor is None:
            process = self.process = PredictionProcess(run_dir)
            with contextlib.suppress(PredictionError):  # the first prediction says why
                process.start()

            def ask_process(
                _run: Path, inputs: Sequence[Path], rows: Sequence[str]
            ) -> PredictionResult:
                return process.predict(inputs, rows)

            predictor = ask_process
        self._predictor = predictor
        self._task: asyncio.Task[None] | None = None
        self.setWindowTitle(f"Try it: {title}")

        self.model_note = QLabel(self._model_text())
        self.model_note.setWordWrap(True)
        self.drop_area = DropArea(self.predict_files)
        self.choose_button = QPushButton("Choose Files…")
        self.choose_button.clicked.connect(self._choose_files)
        self.row_edit = QLineEdit()
        self.row_edit.setPlaceholderText(
            "Paste one CSV row of features (0.1, 2.5, -1.0), or a text for a text model"
        )
        self.row_edit.returnPressed.connect(self.predict_row)
        self.row_button = QPushButton("Predict Row")
        self.row_button.clicked.connect(self.predict_row)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.results = QTableWidget(0, 3)
        self.results.setHorizontalHeaderLabels(["Input", "Prediction", "Next"])
        self.results.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.results.verticalHeader().setVisible(False)
        header = self.results.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(True)
        self.results.setColumnWidth(0, 220)
        self.results.setColumnWidth(1, 160)
        self.confusion_title = QLabel()
        self.confusion = ConfusionTable()
        self.confusion.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.confusion_title.setWordWrap(True)
        self.confusion.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)

        files_row = QHBoxLayout()
        files_row.addWidget(self.drop_area, 1)
        files_row.addWidget(self.choose_button)
        paste_row = QHBoxLayout()
        paste_row.addWidget(self.row_edit, 1)
        paste_row.addWidget(self.row_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.model_note)
        layout.addLayout(files_row)
        layout.addLayout(paste_row)
        layout.addWidget(self.status)
        layout.addWidget(self.results, 1)
        layout.addWidget(self.confusion_title)
        layout.addWidget(self.confusion, 1)
        layout.addWidget(close_button(self))
        self._show_confusion()
        self.resize(700, 780)

    # --- what the panel shows -----------------------------------------------------------

    def _model_text(self) -> str:
        record = read_model_record(self.run_dir)
        if record is None:
            return "model.keras: the run's saved model."
        if record.get("selected") == "best_val_loss":
            return (
                f"model.keras: the weights of step {record.get('step')}, the lowest "
                f"val_loss ({record.get('val_loss', float('nan')):.4g})."
            )
        return f"model.keras: the weights at the run's last step ({record.get('step')})."

    def _show_confusion(self) -> None:
        report = read_confusion(self.run_dir)
        visible = report is not None
        self.confusion.setVisible(visible)
        self.confusion_title.setVisible(visible)
        if report is None:
            return
        matrix = report["matrix"]
        total = sum(map(sum, matrix))
        correct = sum(matrix[i][i] for i in range(len(matrix)))
        accuracy = f", accuracy {correct / total:.1%}" if total else ""
        self.confusion_title.setText(
            f"Confusion matrix on the validation data ({total} examples{accuracy}): rows are "
            "the true class, columns the predicted one"
        )
        self.confusion.show_report(report)

    # --- predictions ------------------------------------------------------------------

    def busy(self) -> bool:
        return self._task is not None and not self._task.done()

    def predict_files(self, paths: list[Path]) -> None:
        self._start(paths, [])

    def predict_row(self) -> None:
        text = self.row_edit.text().strip()
        if text:
            self._start([], [text])

    def _choose_files(self) -> None:
        chosen = file_dialogs.open_files(
            self, "Files to predict", INPUT_FILTER, file_dialogs.Purpose.DATA
        )
        if chosen:
            self.predict_files(chosen)

    def _start(self, paths: list[Path], rows: list[str]) -> None:
        if self.busy():
            return
        for widget in (self.choose_button, self.row_button, self.drop_area):
            widget.setEnabled(False)
        self.status.setStyleSheet("")
        loading = self.process is not None and self.process.model is None
        self.status.setText(
            "Predicting… (TensorFlow and the model load first: a few seconds)"
            if loading
            else "Predicting… (the model runs in a separate process)"
        )
        self._task = asyncio.get_running_loop().create_task(self._predict(paths, rows))

    async def _predict(self, paths: list[Path], rows: list[str]) -> None:
        loop = asyncio.get_running_loop()
        try:
            result = await loop.run_in_executor(None, self._predictor, self.run_dir, paths, rows)
        except asyncio.CancelledError:  # the panel closed: nothing is left to show it in
            return
        except PredictionError as exc:
            self._show_status(str(exc), error=True)
        except Exception as exc:  # a bug of ours: one line, and the panel stays usable
            self._show_status(f"The prediction failed: {type(exc).__name__}: {exc}", error=True)
        else:
            self.show_result(result)
        for widget in (self.choose_button, self.row_button, self.drop_area):
            widget.setEnabled(True)

    def closeEvent(self, event: QCloseEvent) -> None:
        """Ends the prediction process with the panel: no process outlives what shows it."""
        if self._task is not None:
            self._task.cancel()
        if self.process is not None:
            self.process.close()
        super().closeEvent(event)

    def show_result(self, result: PredictionResult) -> None:
        """Adds the predictions at the top of the table; bad inputs are listed in red."""
        for prediction in reversed(result.predictions):
            self._add_row(prediction)
        count = len(result.predictions)
        if result.errors:
            self._show_status("\n".join(result.errors), error=True)
        else:
            self._show_status(f"{count} example(s) predicted.", error=False)

    def _show_status(self, text: str, *, error: bool) -> None:
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        self.status.setText(text)

    def _add_row(self, prediction: Prediction) -> None:
        self.results.insertRow(0)
        name = Path(prediction.input).name if "/" in prediction.input else prediction.input
        cells = [name, *_prediction_cells(prediction)]
        for column, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setToolTip(prediction.input if column == 0 else text)
            self.results.setItem(0, column, item)


def _prediction_cells(prediction: Prediction) -> tuple[str, str]:
    """The top class with its probability, and the runners-up; or the model's outputs."""
    if prediction.classes:
        top, *rest = prediction.classes
        others = ", ".join(
            f"{score.name} {_percent(score.probability)}" for score in rest[: SHOWN_CLASSES - 1]
        )
        return f"{top.name}  {_percent(top.probability)}", others
    values = prediction.values or ()
    return " ".join(f"{value:.4g}" for value in values[:4]), (
        f"+{len(values) - 4} more" if len(values) > 4 else ""
    )


def _percent(probability: float) -> str:
    """A probability as a percentage; a tiny one reads as such, not as a flat 0.0%."""
    return "<0.1%" if 0 < probability < 0.0005 else f"{probability:.1%}"
