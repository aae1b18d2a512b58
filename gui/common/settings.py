"""What the app remembers between sessions (QSettings: organization and app "Distloop").

Everything goes through a default-constructed ``QSettings``, so tests point the
whole app at a temporary location by changing the application's names and path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from PySide6.QtCore import QSettings

from ...engine.mlflow_log import DEFAULT_EXPERIMENT, LiveSettings

ORGANIZATION = "Distloop"
APPLICATION = "Distloop"
MAX_RECENT = 8
_RECENT = "recentFiles"
_LAST = "lastProject"
_TRUSTED_CODE = "trustedCustomCode"
_LAST_FOLDER = "lastFolder"


def recent_files() -> list[str]:
    """Most recent first, at most :data:`MAX_RECENT`."""
    value = QSettings().value(_RECENT, [], type=list)
    return [str(item) for item in value][:MAX_RECENT]


def add_recent_file(path: str | Path) -> None:
    text = str(Path(path).resolve())
    files = [text, *(item for item in recent_files() if item != text)]
    QSettings().setValue(_RECENT, files[:MAX_RECENT])


def remove_recent_file(path: str | Path) -> None:
    text = str(Path(path).resolve())
    QSettings().setValue(_RECENT, [item for item in recent_files() if item != text])


def clear_recent_files() -> None:
    QSettings().setValue(_RECENT, [])


def last_project() -> Path | None:
    """The project file open when the app last closed, if it still exists."""
    value = QSettings().value(_LAST, "", type=str)
    return Path(value) if value and Path(value).is_file() else None


def set_last_project(path: Path | None) -> None:
    QSettings().setValue(_LAST, str(path.resolve()) if path else "")


def last_folder(purpose: str) -> Path | None:
    """Where the last file dialog for ``purpose`` ended (:mod:`gui.files.file_dialogs`), if
    that folder still exists."""
    value = QSettings().value(f"{_LAST_FOLDER}/{purpose}", "", type=str)
    return Path(value) if value and Path(value).is_dir() else None


def remember_folder(purpose: str, folder: Path) -> None:
    QSettings().setValue(f"{_LAST_FOLDER}/{purpose}", str(folder.resolve()))


_ASK_LONG_RUNS = "askLongRuns"


def asks_about_long_runs() -> bool:
    """Whether a run whose ETA is over a day is asked about (until "Don't ask again")."""
    return bool(QSettings().value(_ASK_LONG_RUNS, True, type=bool))


def stop_asking_about_long_runs() -> None:
    QSettings().setValue(_ASK_LONG_RUNS, False)


def trusts_code(path: Path, sha256: str) -> bool:
    """Whether the user agreed to run this custom code file with exactly this content."""
    return f"{sha256} {path}" in _trusted_code()


def trust_code(path: Path, sha256: str) -> None:
    """Remembers the user's yes; an earlier yes for the same file (other content) is dropped."""
    kept = [entry for entry in _trusted_code() if entry.split(" ", 1)[1] != str(path)]
    QSettings().setValue(_TRUSTED_CODE, [*kept, f"{sha256} {path}"])


def _trusted_code() -> list[str]:
    """Entries ``"<sha256> <absolute path>"``: one string each, as every QSettings format keeps."""
    return [str(item) for item in QSettings().value(_TRUSTED_CODE, [], type=list)]


_TRUSTED_LAUNCHES = "trustedLaunches"


def trusts_launch(unusual: list[str]) -> bool:
    """Whether the user agreed to a launch that runs exactly these commands
    (``SshLaunch.unusual``)."""
    return _launch_key(unusual) in _trusted_launches()


def trust_launch(unusual: list[str]) -> None:
    """Remembers the user's yes to a launch that runs these commands."""
    QSettings().setValue(_TRUSTED_LAUNCHES, [*_trusted_launches(), _launch_key(unusual)])


def _trusted_launches() -> list[str]:
    return [str(item) for item in QSettings().value(_TRUSTED_LAUNCHES, [], type=list)]


def _launch_key(unusual: list[str]) -> str:
    return hashlib.sha256("\n".join(unusual).encode()).hexdigest()


_LAUNCH = "launch"


def launch_options() -> dict[str, str]:
    """How Run on Hosts and Check Cluster reach the hosts: ``ssh_config`` (a file for ssh
    -F, or empty), ``remote_command`` and ``remote_dir`` (empty: the engine's defaults)."""
    store = QSettings()
    return {
        key: str(store.value(f"{_LAUNCH}/{key}", "", type=str))
        for key in ("ssh_config", "remote_command", "remote_dir")
    }


def set_launch_options(options: dict[str, str]) -> None:
    store = QSettings()
    for key, value in options.items():
        store.setValue(f"{_LAUNCH}/{key}", value)


_MLFLOW = "mlflow"


def mlflow_store() -> tuple[str, str]:
    """The MLflow tracking URI (empty: MLflow's default) and experiment the window logs to."""
    store = QSettings()
    uri = str(store.value(f"{_MLFLOW}/tracking_uri", "", type=str))
    experiment = str(store.value(f"{_MLFLOW}/experiment", "", type=str))
    return uri, experiment or DEFAULT_EXPERIMENT


def set_mlflow_store(tracking_uri: str, experiment: str) -> None:
    store = QSettings()
    store.setValue(f"{_MLFLOW}/tracking_uri", tracking_uri.strip())
    store.setValue(f"{_MLFLOW}/experiment", experiment.strip())


def logs_live_to_mlflow() -> bool:
    return bool(QSettings().value(f"{_MLFLOW}/live", False, type=bool))


def set_live_mlflow(live: bool) -> None:
    QSettings().setValue(f"{_MLFLOW}/live", live)


def live_mlflow() -> LiveSettings | None:
    """Where the window's runs are logged as they train, or None (the preference is off)."""
    if not logs_live_to_mlflow():
        return None
    uri, experiment = mlflow_store()
    return LiveSettings(uri or None, experiment)
