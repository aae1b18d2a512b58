"""Folders of class subfolders on disk (image and text folders), read without TensorFlow:
validation, the window's scans and preview, and the run's file lists use this.

An image folder has one subfolder per class, as ``keras.utils.image_dataset_from_directory``
reads it: the class names are the subfolder names in sorted order (label 0 is the first),
and a class's images are every supported file below its subfolder. Listing a folder is
cheap; :func:`unreadable_images` reads each file's first and last bytes, so the engine
calls it once at the start of a run, not on every edit.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..fileio import NotRegularFileError, file_kind_problem, open_regular
from ..problems import Problem
from .image_header import pixels_problem

if TYPE_CHECKING:
    from ..config import Project

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
"""What ``tf.io.decode_image`` (and Qt's QImage, for the preview) reads."""
TEXT_EXTENSIONS = (".txt",)
"""What ``text_dataset_from_directory`` reads: one example per file."""


class FolderError(ValueError):
    """The folder cannot be data; the message names the field and what to do."""


@dataclass(frozen=True)
class FolderScan:
    """The classes of a data folder and its files in label order."""

    root: Path
    classes: tuple[str, ...]
    files: tuple[tuple[Path, int], ...]
    """(file, class number), class by class, each class's files sorted by path."""
    others: tuple[Path, ...]
    """Files whose extension no decoder reads: left out, named when a class has nothing else."""
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS

    def counts(self) -> dict[str, int]:
        """Files per class name, every class listed (0 for an empty one)."""
        found = Counter(label for _, label in self.files)
        return {name: found[label] for label, name in enumerate(self.classes)}

    def summary(self) -> FolderSummary:
        return FolderSummary(
            self.root,
            self.classes,
            tuple(self.counts().values()),
            self.others[:OTHERS_NAMED],
            self.extensions,
            unusable=self.unusable(),
            examples=self.examples(),
            other_count=len(self.others),
        )

    def examples(self) -> tuple[tuple[Path, ...], ...]:
        """The first files of the first classes (:data:`EXAMPLE_CLASSES` of
        :data:`EXAMPLES_PER_CLASS`): what a preview shows of the folder."""
        shown: list[list[Path]] = []
        for file, label in self.files:
            if label >= EXAMPLE_CLASSES:
                break
            while len(shown) <= label:
                shown.append([])
            if len(shown[label]) < EXAMPLES_PER_CLASS:
                shown[label].append(file)
        return tuple(tuple(files) for files in shown)

    def unusable(self) -> tuple[Path, str] | None:
        """The first class folder or file a run cannot read for its name or its kind, and
        why: a name that is not UTF-8 (Python lists it with lone surrogates, which
        TensorFlow's strings cannot hold: the run died with a traceback listing every
        file), or a FIFO, device or socket named like an image or a text (its reader
        blocks or never ends). A stat a file, beside the listing's own."""
        for folder in (self.root / name for name in self.classes):
            if not utf8(folder):
                return folder, _NOT_UTF8
        for file, _ in self.files:
            if not utf8(file):
                return file, _NOT_UTF8
            try:
                mode = os.stat(file).st_mode
            except OSError:
                continue  # gone or unreadable: the image check names it (on_bad_file)
            if not stat.S_ISREG(mode):
                return file, file_kind_problem(file) or "is not a regular file"
        return None


_NOT_UTF8 = (
    "is not named in UTF-8 (its other bytes shown as \\x..); rename it: a run reads file "
    "and class names as UTF-8 text"
)


def utf8(path: Path) -> bool:
    """Whether ``path`` is UTF-8 text."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: Path) -> str:
    """``path`` printable whatever its bytes: those that are no UTF-8 as ``\\xff``."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


OTHERS_NAMED = 3
"""Files no decoder reads that a message names, as examples."""
EXAMPLE_CLASSES = 12
EXAMPLES_PER_CLASS = 8
"""A summary names the first files of the first classes, which a preview shows: a few
dozen paths, where the folder's list is megabytes."""


@dataclass(frozen=True)
class FolderSummary:
    """What the checks of a folder need from its scan, without its file list: a few
    hundred bytes where the list of an image folder takes megabytes, so the window can
    have folders scanned in another process and judge the scan again on every edit."""

    root: Path
    classes: tuple[str, ...]
    counts: tuple[int, ...]
    """Files per class, in the classes' order."""
    others: tuple[Path, ...]
    """The first few files no decoder reads (:data:`OTHERS_NAMED`)."""
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS
    unreadable: tuple[tuple[Path, str], ...] | None = None
    """The first image that is empty, cut short or no image, with why, and the count of
    such files (:func:`unreadable_images`); None when not looked for."""
    unreadable_count: int = 0
    unusable: tuple[Path, str] | None = None
    """:meth:`FolderScan.unusable`: a path a run cannot read, and why."""
    examples: tuple[tuple[Path, ...], ...] = ()
    """:meth:`FolderScan.examples`: each shown class's first files, by label."""
    other_count: int = 0
    """All the files no decoder reads (``others`` names the first few)."""


FolderProgress = Callable[[str, int], None]
"""Called with each folder a scan has listed and the files found so far: the window shows
the count, notes the folder's modification time, and raises to cancel a scan."""


def scan_folder(
    path: str | Path,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
    progress: FolderProgress | None = None,
) -> FolderScan:
    """Lists ``path``'s class subfolders and their files; raises FolderError when it is no
    folder."""
    root = Path(path).expanduser()
    try:
        classes, files, labels, others = list_class_files(str(root), extensions, progress)
    except FileNotFoundError:
        raise FolderError(f"{root} does not exist; choose a folder of class subfolders") from None
    except NotADirectoryError:
        raise FolderError(
            f"{root} is a file; choose the folder that holds one subfolder per class"
        ) from None
    except OSError as exc:
        raise FolderError(f"cannot read {root}: {exc.strerror or exc}") from None
    return FolderScan(
        root,
        tuple(classes),
        tuple((Path(file), label) for file, label in zip(files, labels, strict=True)),
        tuple(Path(other) for other in others),
        extensions,
    )


# Plain values and the standard library only, so that "Export as script" can copy its
# source: the script then trains on the same files in the same order. (``progress``'s type
# is quoted because the script has no FolderProgress: an annotation there is never evaluated.)
def list_class_files(
    root: str,
    extensions: tuple[str, ...],
    progress: "FolderProgress | None" = None,  # noqa: UP037
) -> tuple[list[str], list[str], list[int], list[str]]:
    """(class names, files, their class numbers, other files) of a folder of class folders.

    Classes are the subfolders in sorted order; a class's files are every file below its
    folder, sorted, whose extension is in ``extensions`` (other files are listed apart).
    Hidden names (starting with a dot) are left out; links to folders are not followed.
    ``progress(folder, files so far)``, if given, is called after each folder is listed.
    """
    classes = sorted(
        name
        for name in os.listdir(root)
        if not name.startswith(".") and os.path.isdir(os.path.join(root, name))
    )
    files, labels, others = [], [], []
    for label, name in enumerate(classes):
        for directory, subfolders, names in os.walk(os.path.join(root, name)):
            subfolders[:] = sorted(sub for sub in subfolders if not sub.startswith("."))
            for file in sorted(n for n in names if not n.startswith(".")):
                path = os.path.join(directory, file)
                if os.path.splitext(file)[1].lower() in extensions:
                    files.append(path)
                    labels.append(label)
                else:
                    others.append(path)
            if progress is not None:
                progress(directory, len(files) + len(others))
    return classes, files, labels, others


def summarize_folder(
    path: str | Path,
    extensions: tuple[str, ...] = IMAGE_EXTENSIONS,
    progress: FolderProgress | None = None,
    *,
    check_images: bool = False,
) -> FolderSummary:
    """:func:`scan_folder`'s summary, with ``check_images`` its unreadable images too;
    raises FolderError when ``path`` is no folder."""
    scan = scan_folder(path, extensions, progress)
    summary = scan.summary()
    if not check_images:
        return summary
    bad = unreadable_images(scan)
    return replace(summary, unreadable=tuple(bad[:1]), unreadable_count=len(bad))


def checked_folder(path: str | Path, extensions: tuple[str, ...]) -> FolderSummary:
    """An image folder's summary with its unreadable images (a :data:`FolderScanner`)."""
    return summarize_folder(path, extensions, check_images=True)


def folder_problems(scan: FolderSummary, field: str, kind: str = "images") -> list[str]:
    """What keeps the folder from being classification data, one message per problem."""
    where = f"{field}: {scan.root}"
    if scan.unusable is not None:
        path, why = scan.unusable
        return [f"{field}: {shown_path(path)} {why}"]
    if not scan.classes:
        return [
            f"{where} has no subfolders; put each class's {kind} in a subfolder named after "
            "the class"
        ]
    problems = []
    if len(scan.classes) == 1:
        problems.append(
            f"{where} has one class folder ({scan.classes[0]}); a classifier needs at least "
            f"two, one subfolder of {kind} per class"
        )
    empty = [name for name, count in zip(scan.classes, scan.counts, strict=True) if count == 0]
    extensions = " ".join(scan.extensions)
    if empty and len(empty) == len(scan.classes):
        problems.append(f"{where} holds no {kind} ({extensions}){_others_text(scan)}")
    elif empty:
        problems.append(
            f"{where}: class folder(s) {', '.join(empty)} hold no {kind} "
            f"({extensions}){_others_text(scan)}; add {kind} or remove the folder(s)"
        )
    return problems


def _others_text(scan: FolderSummary) -> str:
    if not scan.others:
        return ""
    shown = ", ".join(str(path.relative_to(scan.root)) for path in scan.others)
    return f"; other files such as {shown} are not read"


FolderScanner = Callable[[str, tuple[str, ...]], FolderSummary]
"""(path, extensions) to the folder's summary, raising FolderError: :func:`summarize_folder`,
or the window's scans made beforehand in another process."""


# Each format's first bytes, and the bytes its last block ends with: a file cut short
# (an interrupted copy or download) has the right start but not the right end.
_SIGNATURES = {
    "PNG": (b"\x89PNG\r\n\x1a\n", b"IEND\xaeB`\x82"),
    "JPEG": (b"\xff\xd8\xff", b"\xff\xd9"),
    "GIF": (b"GIF8", b";"),
    "BMP": (b"BM", b""),
}
_TAIL_BYTES = 64


def image_file_problem(path: Path) -> str | None:
    """Why ``path`` is no image a decoder can read, or None when its structure is sound.

    Reads the header and the last bytes only: a full decode would cost as much as an
    epoch. An image declaring more pixels than any photograph is refused too.
    """
    try:
        with open_regular(path) as handle:
            too_large = pixels_problem(handle)
            handle.seek(0)
            head = handle.read(16)
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except NotRegularFileError:
        return file_kind_problem(path) or "is not a regular file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "is empty"
    if too_large is not None:
        return too_large
    for name, (start, end) in _SIGNATURES.items():
        if not head.startswith(start):
            continue
        if name == "BMP":
            declared = int.from_bytes(head[2:6], "little")
            return None if declared <= size else "is cut short (BMP)"
        if name == "JPEG":
            tail = tail.rstrip(b"\x00")  # some cameras pad after the end marker
        return None if end in tail else f"is cut short ({name})"
    return "is not a JPEG, PNG, GIF or BMP image"


def unreadable_images(
    scan: FolderScan, progress: Callable[[int], None] | None = None
) -> list[tuple[Path, str]]:
    """The folder's files that no decoder would read, each with the reason;
    ``progress(files checked)`` is told as they are checked."""
    found = []
    for index, (path, _) in enumerate(scan.files):
        if progress is not None:
            progress(index)
        problem = image_file_problem(path)
        if problem is not None:
            found.append((path, problem))
    return found


def class_label_problems(project: Project, what: str) -> list[Problem]:
    """A folder's labels are class numbers: the loss must be a crossentropy."""
    model, loss = project.model, project.loss
    if not loss.is_classification:
        return [
            Problem(
                ("loss", "kind"),
                f"{loss.kind} is a regression loss; {what}'s labels are classes "
                "(its subfolders), so it needs a crossentropy loss",
            )
        ]
    if loss.kind == "binary_crossentropy" and model.output_units != 1:
        return [
            Problem(
                ("model", "layers"),
                f"binary_crossentropy needs a last dense layer of 1 unit, not {model.output_units}",
            )
        ]
    return []
