"""Helpers for the data sources' lines of an exported script (``engine.script_export``).

Where the engine's data code is what makes the script's trace equal the engine's
(synthetic generators, folder listing, the evaluation split's choice, image decoding,
text vectorization, TFRecord parsing), the script gets that code's source, not a second
version: from TensorFlow-free modules with ``inspect``, from ``engine/tf`` modules by
reading the file (:func:`engine_tf_source`).
"""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path

from ..config import Project, split_counts
from .folders import list_class_files
from .split import held_out


def engine_tf_source(module: str, *names: str) -> str:
    """The source of functions and constants of ``engine/tf/data_sources/<module>.py``,
    read from the file.

    Those modules import TensorFlow, and this one must not (the window imports it), so
    ``inspect`` cannot reach them; a copy written out here would be a second definition
    that drifts from what the engine runs. The file is read instead, and ``ast`` finds
    each definition (without its decorators: caching is the engine's business).
    """
    path = Path(__file__).parent.parent / "tf" / "data_sources" / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    found: dict[str, str] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef):
            name = node.name
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
        else:
            continue
        if name in names:
            found[name] = ast.get_source_segment(text, node) or ""
    return "\n\n\n".join(found[name] for name in names)


def source_lines(*functions: Callable[..., object]) -> list[str]:
    """Functions of TensorFlow-free engine modules, as the script's lines."""
    return definitions("\n\n\n".join(inspect.getsource(f).strip() for f in functions))


def definitions(text: str) -> list[str]:
    """Top-level definitions as lines of the script, with two blank lines around them."""
    return ["", "", text, "", ""]


def split_of(project: Project) -> float | None:
    return project.evaluation.split if project.evaluation is not None else None


def held_out_lines(split: float, count: str, seed: int) -> list[str]:
    """The held_out function and the line that picks the held-out examples of ``count``."""
    return [
        *source_lines(split_counts, held_out),
        "",
        f"# evaluation.split: {split:g} of the examples are held out to evaluate on (the",
        "# same ones in every run of the project); training keeps the rest, in their order.",
        f"held = held_out({count}, {split!r}, {seed})",
    ]


def array_dataset_lines(project: Project, x_and_y: list[str]) -> list[str]:
    """``dataset`` from arrays ``x`` and ``y`` that ``x_and_y`` makes: shaped and typed as
    the engine's, less a split's held-out examples."""
    model = project.model
    lines = [
        *x_and_y,
        f"x = x.reshape(len(x), *{list(model.input_shape)!r}).astype(np.float32)",
        "y = y.astype(np.int32) if y.dtype.kind in 'iu' else y.astype(np.float32)",
    ]
    split = split_of(project)
    if split is not None:
        lines += [*held_out_lines(split, "len(x)", project.training.seed)]
        lines.append("x, y = x[~held], y[~held]")
    lines.append("dataset = tf.data.Dataset.from_tensor_slices((x, y))")
    return lines


def folder_lines(
    path: str, project: Project, extensions: tuple[str, ...], notes: list[str]
) -> list[str]:
    """A class folder's files and labels listed as the engine lists them (``notes``: comment
    lines after the listing), less a split's."""
    lines = [
        *source_lines(list_class_files),
        f"classes, files, labels, _ = list_class_files({path!r}, {extensions!r})",
        "print('classes:', ', '.join(classes))",
        *notes,
    ]
    split = split_of(project)
    if split is not None:
        lines += [
            *held_out_lines(split, "len(files)", project.training.seed),
            "files = [file for file, out in zip(files, held) if not out]",
            "labels = [label for label, out in zip(labels, held) if not out]",
        ]
    return lines


def label_call(project: Project) -> str:
    """The call that makes a class number what the loss takes (``encode_label``)."""
    return f"encode_label(label, {project.loss.kind!r}, {project.model.output_units})"
