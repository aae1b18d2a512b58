"""Custom step code: the contract of a project's ``custom_code`` file, and its loader.

A project may name a Python file (``"custom_code": {"path": "my_step.py"}``,
relative to the project file). Only the engine process loads it, and only to run
the project: opening, editing or validating a project never executes it. The
file defines ``train_step`` and may define any of the builders; each one it leaves
out falls back to the project's own settings::

    import tensorflow as tf


    def build_models(project):
        # Called inside strategy.scope(), so every variable is mirrored.
        # Default: {"model": the project's model section, built as without custom code}.
        return {"generator": ..., "discriminator": ...}


    def build_optimizers(models, project):
        # Called inside strategy.scope(); keys name the model each optimizer trains.
        # Default: the project's optimizer, one for each model. The engine then calls
        # optimizer.build(model.trainable_variables) for any not yet built (Keras 3
        # needs optimizer variables made before the replicated step, with 2+ replicas).
        return {"generator": tf.keras.optimizers.Adam(1e-3), ...}


    def build_dataset(project):
        # A tf.data.Dataset of GLOBAL batches (project.data.global_batch_size examples);
        # the engine repeats it for training.steps or training.epochs, distributes
        # it over the replicas and skips what a resumed run already trained on.
        # Default: the project's data section.
        return tf.data.Dataset.from_tensor_slices(...).batch(project.data.global_batch_size)


    def train_step(step, inputs):
        # Runs on every replica, exactly like the built-in step: strategy.run inside
        # tf.function (one step per call, or several fused), each loss reduced with
        # strategy.reduce(SUM). inputs is this replica's share of one global batch.
        # step (engine.tf.user_code.StepContext) has models, optimizers, loss_object
        # (the project's per-example loss, reduction=None), global_batch_size,
        # num_replicas, strategy, project and the helpers average_loss() and
        # regularization_loss().
        features, labels = inputs
        model, optimizer = step.models["model"], step.optimizers["model"]
        with tf.GradientTape() as tape:
            per_example_loss = step.loss_object(labels, model(features, training=True))
            loss = step.average_loss(per_example_loss) + step.regularization_loss(model)
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        return loss  # or {"name": loss, ...}: every named loss is reported as its own curve

The file may import modules kept beside it (its folder is put on ``sys.path``).
A step may do anything a round of training needs (several updates of several
models, e.g. two generator steps per discriminator step) and returns either one
scalar loss or a dict of named scalar losses. Names are letters, digits and
underscores. With a dict, the run's primary loss (``StepMetrics.losses``, the
``loss`` column, NaN checks) is the ``"loss"`` entry when there is one, else the
sum of the named losses; each named loss gets its own ``metrics.csv`` column.

Return per-replica losses scaled for a sum across replicas: average per-example
losses with ``step.average_loss`` (``tf.nn.compute_average_loss`` over the
*global* batch) and add ``step.regularization_loss(model)``
(``tf.nn.scale_regularization_loss``), as the guide does; the reported loss then
does not depend on the number of replicas. Take randomness from the data (e.g.
noise in the dataset) rather than from ``tf.random`` inside the step, so a run
repeats exactly and does not depend on the replica count.

Problems are reported before training as a failed run (``UserCodeError``) that
names the file and the function: a missing ``train_step``, a signature that does
not fit, a syntax error (with its line), an exception while loading or tracing,
a builder returning the wrong kind of object, a loss that is not a scalar.

This module is TensorFlow-free: it reads, compiles and checks the file;
``engine.tf.user_code`` builds and runs what it defines. Before a run executes a
file, the command line prints its :func:`fingerprint` and the window asks the user
to trust it (per file and content), since a project may come from anyone.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

CONTRACT: dict[str, tuple[str, ...]] = {
    "build_models": ("project",),
    "build_optimizers": ("models", "project"),
    "build_dataset": ("project",),
    "train_step": ("step", "inputs"),
}
"""Every function a custom code file may define, with the arguments the engine passes."""
REQUIRED = ("train_step",)
MODULE_NAME = "distloop_custom_code"


class UserCodeError(Exception):
    """The project's custom code cannot run; the message names the file and the function."""

    ag_pass_through = True
    """Tells AutoGraph to re-raise this error as it is: it would otherwise rewrite the
    message of an error raised while tracing into a dump of generated-code frames."""


@dataclass(frozen=True)
class UserCode:
    """The functions a custom code file defines (None where it falls back to the project)."""

    path: Path
    train_step: Callable[..., Any]
    build_models: Callable[..., Any] | None = None
    build_optimizers: Callable[..., Any] | None = None
    build_dataset: Callable[..., Any] | None = None

    def where(self, function: str) -> str:
        """How messages name a function: ``gan_step.py:train_step``."""
        return f"{self.path}:{function}"


@dataclass(frozen=True)
class Fingerprint:
    """Which code a run would execute: the real file and its content's hash.

    Trust is given to this pair, so a file that changes, or a path that comes to
    point at another file, is a new question.
    """

    path: Path
    sha256: str
    project_dir: Path | None
    """The project file's folder, when the project has one (a run folder's copy has not)."""

    @property
    def outside_project(self) -> bool:
        """True when the file lies outside the project's folder: someone else's code, maybe."""
        return self.project_dir is not None and not self.path.is_relative_to(self.project_dir)


def fingerprint(path: str | Path, project_dir: Path | None) -> Fingerprint:
    """Reads the file (never executes it); raises UserCodeError naming it when unreadable."""
    try:
        real = Path(path).resolve(strict=True)
        digest = hashlib.sha256(real.read_bytes()).hexdigest()
    except FileNotFoundError:
        raise UserCodeError(f"custom_code.path: {path} does not exist") from None
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise UserCodeError(f"custom_code.path: cannot read {path}: {exc}") from None
    return Fingerprint(real, digest, project_dir.resolve() if project_dir else None)


def load_user_code(path: str | Path) -> UserCode:
    """Executes the file as a module and checks what it defines against :data:`CONTRACT`."""
    path = Path(path)
    try:
        source = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserCodeError(f"custom_code.path: {path} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserCodeError(f"custom_code.path: cannot read {path}: {exc}") from None
    try:
        code = compile(source, str(path), "exec")
    except SyntaxError as exc:
        raise UserCodeError(
            f"{path}:{exc.lineno}: syntax error: {exc.msg}"
            + (f"\n    {exc.text.rstrip()}" if exc.text else "")
        ) from None
    module = _execute(path, code)
    functions: dict[str, Callable[..., Any] | None] = {}
    for name, parameters in CONTRACT.items():
        function = getattr(module, name, None)
        if function is None:
            if name in REQUIRED:
                raise UserCodeError(
                    f"{path} defines no {name}({', '.join(parameters)}); a custom code file "
                    f"must define it (to keep the built-in step: "
                    f"from engine.tf.user_code import guide_train_step as train_step)"
                )
            functions[name] = None
            continue
        check_signature(path, name, function)
        functions[name] = function
    train_step = functions.pop("train_step")
    assert train_step is not None  # REQUIRED
    return UserCode(path=path, train_step=train_step, **functions)


def check_signature(path: Path, name: str, function: object) -> None:
    """Refuses a function that cannot be called with the arguments the engine passes."""
    parameters = CONTRACT[name]
    expected = f"{name}({', '.join(parameters)})"
    if not callable(function):
        raise UserCodeError(f"{path}: {name} must be a function {expected}, not {function!r}")
    if inspect.iscoroutinefunction(function) or inspect.isgeneratorfunction(function):
        raise UserCodeError(f"{path}: {name} must be a plain function {expected}")
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return  # a builtin or C callable without a signature: let the call decide
    try:
        signature.bind(*parameters)
    except TypeError as exc:
        raise UserCodeError(
            f"{path}: {name}{signature} does not fit the call {expected}: {exc}"
        ) from None


def _execute(path: Path, code: Any) -> ModuleType:
    """Runs the module's top level; an exception is reported at its line in the file."""
    spec = importlib.util.spec_from_file_location(MODULE_NAME, path)
    assert spec is not None  # a path with a .py name always has a spec
    module = importlib.util.module_from_spec(spec)
    # Registered while it runs: dataclasses and pickling look modules up by name.
    sys.modules[MODULE_NAME] = module
    # Its folder is importable, so the file may import helper modules kept beside it.
    if str(path.parent) not in sys.path:
        sys.path.insert(0, str(path.parent))
    try:
        exec(code, module.__dict__)
    except Exception as exc:
        del sys.modules[MODULE_NAME]
        raise UserCodeError(
            f"{location_in(path, exc)}: loading the file raised {type(exc).__name__}: {exc}"
        ) from exc
    return module


def location_in(path: Path, exc: BaseException) -> str:
    """``file:line`` of the innermost traceback frame inside ``path``, else the file."""
    frames = traceback.extract_tb(exc.__traceback__)
    lines = [frame.lineno for frame in frames if Path(frame.filename) == path][-1:]
    if not lines:
        # Inside tf.function, AutoGraph runs a converted copy of the user's code from a
        # temporary file; the metadata it attaches to errors maps its frames back to the
        # file, innermost first.
        metadata = getattr(exc, "ag_error_metadata", None)
        stack = getattr(metadata, "translated_stack", ())
        lines = [frame.lineno for frame in stack if Path(frame.filename) == path][:1]
    return f"{path}:{lines[0]}" if lines else str(path)
