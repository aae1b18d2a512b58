"""The window's menus, toolbar and window-wide shortcuts, entry by entry: text, shortcut,
enabled state and tooltip, idle and while a run goes on.

Each feature owns its actions and their enable rules; the window places them. These rows
were taken from the window while it still held the study flow and the Run/Stop rules
itself, so a move that drops, renames, re-keys or re-enables an entry fails here.
"""

from __future__ import annotations

from pathlib import Path

from distloop.engine.study.runner import StudyPlan, StudySettings, write_plan
from distloop.engine.study.space import parse_space
from distloop.gui.shell.main_window import MainWindow
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu
from support.gui_fakes import FakeEngine, factory, seed_run

Row = tuple[str, str, str, bool, str]
"""Where (menu path, "toolbar" or "window"), text, shortcut, enabled, tooltip."""


def _menu_rows(menu: QMenu, path: str) -> list[Row]:
    rows: list[Row] = []
    for action in menu.actions():
        if action.isSeparator():
            rows.append((path, "-", "", True, ""))
        elif action.menu() is not None:  # a submenu: its title (Open Recent fills itself)
            rows.append((path, action.text(), "", action.isEnabled(), ""))
        else:
            rows.append(_row(path, action))
    return rows


def _row(path: str, action: QAction) -> Row:
    return (path, action.text(), action.shortcut().toString(), action.isEnabled(), action.toolTip())


def window_actions(window: MainWindow) -> list[Row]:
    """Every entry of the menu bar, the main toolbar and the window's own shortcuts."""
    rows: list[Row] = []
    for top in window.menuBar().actions():
        rows.extend(_menu_rows(top.menu(), top.text()))
    rows.extend(_menu_rows(window.examples_menu, "&File/&Examples"))
    rows.extend(
        ("toolbar", "-", "", True, "") if action.isSeparator() else _row("toolbar", action)
        for action in window.toolbar.actions()
    )
    rows.extend(_row("window", action) for action in window.actions())
    return rows


IDLE: list[Row] = [
    ("&File", "&New", "Ctrl+N", True, "Start a new project from the seed example"),
    ("&File", "&Open…", "Ctrl+O", True, "Open a project file"),
    (
        "&File",
        "Open &Study…",
        "Ctrl+Alt+O",
        True,
        "Show a study's folder (distloop sweep): its trials, history, parallel coordinates and "
        "parameter importances",
    ),
    ("&File", "Open &Recent", "", True, ""),
    ("&File", "&Examples", "", True, ""),
    ("&File", "-", "", True, ""),
    ("&File", "&Save", "Ctrl+S", True, "Save the project"),
    ("&File", "Save &As…", "Ctrl+Shift+S", True, "Save the project under a new name"),
    ("&File", "-", "", True, ""),
    (
        "&File",
        "Export as &Script…",
        "Ctrl+Shift+E",
        True,
        "Write the project as a standalone TensorFlow program that needs no Distloop",
    ),
    ("&File", "Export &Plot…", "Ctrl+Shift+P", True, "Save the loss plot as a PNG or SVG image"),
    (
        "&File",
        "Copy Project &JSON",
        "Ctrl+Shift+J",
        True,
        "Copy the project file's text to the clipboard",
    ),
    (
        "&File",
        "Export &Cluster Setup…",
        "",
        True,
        "Write the files that start this project's cluster on real hosts: TF_CONFIGs, shell "
        "scripts, Kubernetes manifests or a Kubeflow TFJob",
    ),
    ("&File", "-", "", True, ""),
    ("&File", "&Quit", "Ctrl+Q", True, "Quit"),
    ("&Run", "&Run", "Ctrl+R", True, "Train the project (Ctrl+R)"),
    (
        "&Run",
        "S&top",
        "Ctrl+.",
        False,
        "Stop after the current step; kill the engine if it does not stop within 5 s",
    ),
    (
        "&Run",
        "Resume Run",
        "Ctrl+Shift+R",
        False,
        "Continue the selected stopped, failed or interrupted run from its last checkpoint "
        "(Ctrl+Shift+R)",
    ),
    (
        "&Run",
        "Follow Job",
        "Ctrl+Shift+G",
        False,
        "Not now: select a job Slurm still holds (an ended job's run continues with Resume) "
        "(Ctrl+Shift+G)",
    ),
    (
        "&Run",
        "Try It…",
        "Ctrl+T",
        False,
        "Run a saved model (model.keras) on images, texts, CSV rows or arrays (Ctrl+T)",
    ),
    ("&Run", "-", "", True, ""),
    (
        "&Run",
        "&Check Cluster",
        "Ctrl+Shift+K",
        False,
        "Not now: strategy mirrored runs in one process: choose multi_worker_mirrored or "
        "parameter_server to run on several machines",
    ),
    (
        "&Run",
        "Run on &Hosts",
        "Ctrl+Shift+O",
        False,
        "Not now: strategy mirrored runs in one process: choose multi_worker_mirrored or "
        "parameter_server to run on several machines",
    ),
    (
        "&Run",
        "&Submit to Slurm…",
        "Ctrl+Shift+B",
        False,
        "Not now: strategy mirrored runs in one process: choose multi_worker_mirrored or "
        "parameter_server to run on several nodes",
    ),
    (
        "&Run",
        "&Dump Stacks",
        "Ctrl+Shift+D",
        False,
        "Not now: no cluster is running (Dump Stacks asks the tasks of a running cluster)",
    ),
    ("&Run", "-", "", True, ""),
    ("&Run", "Add to &Queue", "Ctrl+Shift+A", True, "Queue the project as the forms show it"),
    (
        "&Run",
        "S&tart Queue",
        "",
        False,
        "Run the queued items one after another, each in its own run folder",
    ),
    (
        "&Run",
        "Add &Sweep…",
        "Ctrl+Shift+W",
        True,
        "Search settings of the project with an Optuna study: trials that learn from each other, "
        "pruned while they train",
    ),
    ("&Run", "-", "", True, ""),
    ("&Run", "&Detect Devices", "", True, "List the devices TensorFlow sees on this machine"),
    (
        "&Run",
        "Open Run &Folder",
        "",
        False,
        "Show the last run's folder (project, metrics.csv, status, engine log)",
    ),
    (
        "&Run",
        "&MLflow Logging…",
        "",
        True,
        "Where runs are logged to MLflow, and whether each run is logged as it trains",
    ),
    ("&View", "&Auto-Range Plot", "Ctrl+0", True, "Auto-Range Plot"),
    ("&View", "&Log Scale", "", True, "Log Scale"),
    ("&View", "&Clear Log", "", True, "Clear Log"),
    ("&View", "-", "", True, ""),
    ("&View", "&Project Settings", "Ctrl+Shift+F", True, "Project Settings"),
    ("&View", "&Log", "Ctrl+Shift+L", True, "Log"),
    ("&View", "&Runs Panel", "Ctrl+Shift+H", True, "Runs Panel"),
    ("&View", "R&esources", "Ctrl+Shift+M", True, "Resources"),
    ("&View", "Run &Queue", "Ctrl+Shift+U", True, "Run Queue"),
    ("&View", "&Studies", "", True, "Studies"),
    ("&View", "&Study", "", True, "Study"),
    (
        "&View",
        "Clear Comparison",
        "Ctrl+Shift+Backspace",
        True,
        "Remove the compared runs from the plot (Ctrl+Shift+Backspace)",
    ),
    ("&View", "Cluster", "", True, "Cluster"),
    ("&View", "-", "", True, ""),
    (
        "&View",
        "Reset &Layout",
        "",
        True,
        "Put the panels, the toolbar and the plot back where a first start puts them",
    ),
    ("&View", "&Full Screen", "F11", True, "Fill the screen (F11)"),
    (
        "&Help",
        "Distloop &Guide",
        "F1",
        True,
        "The guide: what Distloop does, the project file, the command line, clusters",
    ),
    ("&Help", "&Keyboard Shortcuts", "Ctrl+/", True, "Every keyboard shortcut of the window"),
    ("&Help", "-", "", True, ""),
    ("&Help", "&About Distloop", "", True, "About Distloop"),
    (
        "&File/&Examples",
        "seed: Seed: the guide's custom loop",
        "",
        True,
        "seed: Seed: the guide's custom loop",
    ),
    (
        "&File/&Examples",
        "classification: Synthetic classification on 2 CPU replicas",
        "",
        True,
        "classification: Synthetic classification on 2 CPU replicas",
    ),
    (
        "&File/&Examples",
        "digits: Handwritten digits: a small CNN on 2 CPU replicas",
        "",
        True,
        "digits: Handwritten digits: a small CNN on 2 CPU replicas",
    ),
    (
        "&File/&Examples",
        "gan: GAN on a ring: custom step code",
        "",
        True,
        "gan: GAN on a ring: custom step code",
    ),
    (
        "&File/&Examples",
        "languages: Which language? Word embeddings on 2 CPU replicas",
        "",
        True,
        "languages: Which language? Word embeddings on 2 CPU replicas",
    ),
    (
        "&File/&Examples",
        "regression: Synthetic regression, one device",
        "",
        True,
        "regression: Synthetic regression, one device",
    ),
    ("toolbar", "&New", "Ctrl+N", True, "Start a new project from the seed example"),
    ("toolbar", "&Open…", "Ctrl+O", True, "Open a project file"),
    ("toolbar", "&Save", "Ctrl+S", True, "Save the project"),
    ("toolbar", "-", "", True, ""),
    ("toolbar", "&Run", "Ctrl+R", True, "Train the project (Ctrl+R)"),
    (
        "toolbar",
        "S&top",
        "Ctrl+.",
        False,
        "Stop after the current step; kill the engine if it does not stop within 5 s",
    ),
    (
        "toolbar",
        "Try It…",
        "Ctrl+T",
        False,
        "Run a saved model (model.keras) on images, texts, CSV rows or arrays (Ctrl+T)",
    ),
    (
        "window",
        "Try It…",
        "Ctrl+T",
        False,
        "Run a saved model (model.keras) on images, texts, CSV rows or arrays (Ctrl+T)",
    ),
    ("window", "Add to &Queue", "Ctrl+Shift+A", True, "Queue the project as the forms show it"),
    (
        "window",
        "Add &Sweep…",
        "Ctrl+Shift+W",
        True,
        "Search settings of the project with an Optuna study: trials that learn from each other, "
        "pruned while they train",
    ),
]
"""A fresh window on the seed example: Run, Add Sweep… and the queue enabled."""

RUNNING: dict[tuple[str, str], tuple[bool, str]] = {
    ("&Run", "&Run"): (False, "A run is in progress"),
    ("&Run", "&Submit to Slurm…"): (False, "Not now: a run is in progress"),
    ("&Run", "Add &Sweep…"): (
        False,
        "Search settings of the project with an Optuna study: trials that "
        "learn from each other, pruned while they train",
    ),
    ("&Run", "Open Run &Folder"): (
        True,
        "Show the last run's folder (project, metrics.csv, status, engine log)",
    ),
    ("&Run", "Run on &Hosts"): (False, "Not now: a run is in progress"),
    ("&Run", "S&top"): (
        True,
        "Stop after the current step; kill the engine if it does not stop within 5 s",
    ),
    ("toolbar", "&Run"): (False, "A run is in progress"),
    ("toolbar", "S&top"): (
        True,
        "Stop after the current step; kill the engine if it does not stop within 5 s",
    ),
    ("window", "Add &Sweep…"): (
        False,
        "Search settings of the project with an Optuna study: trials "
        "that learn from each other, pruned while they train",
    ),
}
"""What a run in progress changes: (where, text) -> (enabled, tooltip)."""

STUDYING: dict[tuple[str, str], tuple[bool, str]] = {
    **{key: RUNNING[key] for key in RUNNING if key[1] in ("S&top", "Add &Sweep…")},
    ("&Run", "&Run"): (False, "A study is running"),
    ("toolbar", "&Run"): (False, "A study is running"),
}
"""A study between two trials: no run goes on, yet Run waits and Stop stops the study
(the hosts' actions look at the run alone)."""


def _with(rows: list[Row], changes: dict[tuple[str, str], tuple[bool, str]]) -> list[Row]:
    return [
        (where, text, keys, *changes.get((where, text), (enabled, tip)))
        for where, text, keys, enabled, tip in rows
    ]


def test_the_menus_toolbar_and_shortcuts_are_as_before(qtbot, make_window) -> None:
    window: MainWindow = make_window(engine_factory=factory(FakeEngine(seed_run(20, 5)), []))
    assert window_actions(window) == IDLE
    assert window.validity.text() == "Ready to run"
    window.run_action.trigger()
    assert window_actions(window) == _with(IDLE, RUNNING)
    assert window.validity.text() == "Run in progress"
    qtbot.waitUntil(lambda: not window.controller.active, timeout=10_000)
    folder = ("&Run", "Open Run &Folder")  # the last run's folder is there to open now
    assert window_actions(window) == _with(IDLE, {folder: RUNNING[folder]})


def test_a_study_between_trials_holds_run_and_offers_stop(make_window, tmp_path: Path) -> None:
    window: MainWindow = make_window()
    project = window.validation.project
    space = parse_space('{"optimizer.learning_rate": {"low": 0.001, "high": 0.1}}', project)
    folder = tmp_path / "study"
    plan = StudyPlan(project, space, StudySettings(trials=2, sampler="random", pruner="none"))
    write_plan(folder, plan)
    window.study_session.start(folder, plan)  # its first trial starts on the next event
    assert window_actions(window) == _with(IDLE, STUDYING)
    assert window.validity.text() == "Study in progress"
    window.stop_action.trigger()  # between two trials the study ends at once
    assert not window.study_session.running
    assert window_actions(window) == IDLE
