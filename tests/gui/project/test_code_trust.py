"""Custom step code runs only once the user trusts that file with that content."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from distloop.engine.config import CustomCode, Project
from distloop.engine.examples import example_text, load_example
from distloop.engine.run_folder import write_status
from distloop.engine.run_history import summarize
from distloop.gui.common import dialogs
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtWidgets import QMessageBox
from support.gui_fakes import FakeEngine, seed_run

STEP = "def train_step(step, inputs):\n    return 0.0\n"


class Answers:
    """Stands in for QMessageBox.question: records each question, answers from a list."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.asked: list[str] = []
        self.answers: list[QMessageBox.StandardButton] = []
        monkeypatch.setattr(dialogs.QMessageBox, "question", self._question)

    def _question(self, _parent: object, title: str, text: str, *_args: object) -> object:
        assert title == "Run custom step code?"
        self.asked.append(text)
        return self.answers.pop(0)

    def will(self, *answers: bool) -> None:
        yes, no = QMessageBox.StandardButton.Yes, QMessageBox.StandardButton.No
        self.answers = [yes if answer else no for answer in answers]


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> Answers:
    return Answers(monkeypatch)


class Engines:
    """An engine factory that records each run it is asked to start."""

    def __init__(self) -> None:
        self.made: list[tuple[Project, Path]] = []

    def __call__(self, project: Project, run_dir: Path, *, resume: bool = False) -> FakeEngine:
        self.made.append((project, run_dir))
        return FakeEngine(seed_run(4, 2))


def project_with_code(tmp_path: Path, code_path: str, **changes: object) -> Path:
    data = {**json.loads(example_text("seed")), "custom_code": {"path": code_path}, **changes}
    folder = tmp_path / "project"
    folder.mkdir(exist_ok=True)
    (folder / "project.json").write_text(json.dumps(data))
    return folder / "project.json"


def run_and_wait(qtbot, window: MainWindow) -> None:
    window.run()
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)


def test_run_asks_once_per_file_and_content_and_no_starts_nothing(
    qtbot, make_window: Callable[..., MainWindow], answers: Answers, tmp_path: Path
) -> None:
    code = tmp_path / "elsewhere" / "evil.py"
    code.parent.mkdir()
    code.write_text(STEP)
    path = project_with_code(tmp_path, "../elsewhere/evil.py")
    engines = Engines()
    window = make_window(engine_factory=engines)
    assert window.open_project(path)

    answers.will(False)
    run_and_wait(qtbot, window)
    assert engines.made == [] and not (tmp_path / "runs").exists()
    (question,) = answers.asked
    digest = hashlib.sha256(STEP.encode()).hexdigest()
    assert f"{code}\n(sha256 {digest})" in question
    assert f"outside the project's folder ({tmp_path / 'project'})" in question
    assert any(f"not run: {code} is not trusted" in line for line in window.log_panel.lines())

    answers.will(True)
    run_and_wait(qtbot, window)
    assert len(answers.asked) == 2 and len(engines.made) == 1
    assert engines.made[0][0].custom_code.path == str(code)
    assert any(
        f"running custom step code {code} (sha256 {digest})" in line
        for line in window.log_panel.lines()
    )

    run_and_wait(qtbot, window)  # remembered: no question
    later = make_window(engine_factory=engines)  # remembered in the settings, too
    assert later.open_project(path)
    run_and_wait(qtbot, later)
    assert len(answers.asked) == 2 and len(engines.made) == 3

    code.write_text(STEP + "# changed\n")
    answers.will(False)
    run_and_wait(qtbot, later)
    assert len(answers.asked) == 3 and len(engines.made) == 3


def test_code_in_the_project_folder_is_asked_about_without_the_warning(
    qtbot, make_window: Callable[..., MainWindow], answers: Answers, tmp_path: Path
) -> None:
    path = project_with_code(tmp_path, "step.py")
    (path.parent / "step.py").write_text(STEP)
    engines = Engines()
    window = make_window(engine_factory=engines)
    assert window.open_project(path)
    answers.will(True)
    run_and_wait(qtbot, window)
    (question,) = answers.asked
    assert str(path.parent / "step.py") in question and "outside" not in question
    assert len(engines.made) == 1


def test_a_cluster_run_asks_too(
    qtbot, make_window: Callable[..., MainWindow], answers: Answers, tmp_path: Path
) -> None:
    path = project_with_code(tmp_path, "step.py", strategy={"kind": "multi_worker_mirrored"})
    (path.parent / "step.py").write_text(STEP)
    clusters = Engines()
    window = make_window(cluster_factory=clusters)
    assert window.open_project(path)
    answers.will(False)
    run_and_wait(qtbot, window)
    assert len(answers.asked) == 1 and clusters.made == []


def test_resume_asks_and_no_resumes_nothing(
    qtbot, make_window: Callable[..., MainWindow], answers: Answers, tmp_path: Path
) -> None:
    code = tmp_path / "step.py"
    code.write_text(STEP)
    run_dir = tmp_path / "runs" / "stopped"
    run_dir.mkdir(parents=True)
    project = load_example("seed").model_copy(update={"custom_code": CustomCode(path=str(code))})
    (run_dir / "project.json").write_text(project.to_json())
    write_status(run_dir, "stopped", last_step=2)
    resumed: list[Path] = []

    def engines(project: Project, folder: Path, *, resume: bool = False) -> FakeEngine:
        assert resume
        resumed.append(folder)
        return FakeEngine(seed_run(4, 2))

    window = make_window(engine_factory=engines)
    answers.will(False, True)
    window.resume_run(summarize(run_dir))
    assert resumed == [] and len(answers.asked) == 1
    assert "outside" not in answers.asked[0]  # a run folder's copy has no project folder
    window.resume_run(summarize(run_dir))
    assert resumed == [run_dir] and len(answers.asked) == 2
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)


def test_the_shipped_examples_code_is_not_asked_about(
    qtbot, make_window: Callable[..., MainWindow], answers: Answers
) -> None:
    engines = Engines()
    window = make_window(engine_factory=engines)
    window.open_example("gan")
    run_and_wait(qtbot, window)
    assert answers.asked == [] and len(engines.made) == 1
