"""What the app remembers between sessions (QSettings: organization and app "Distloop").

Everything goes through a default-constructed ``QSettings``, so tests point the
whole app at a temporary location by changing the application's names and path.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QSettings

ORGANIZATION = "Distloop"
APPLICATION = "Distloop"
MAX_RECENT = 8
_RECENT = "recentFiles"
_LAST = "lastProject"


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
