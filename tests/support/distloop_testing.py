"""Helpers shared by the test modules (a plain module: conftest is for fixtures)."""

from __future__ import annotations

import ast
import functools
import json
import os
import signal
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from distloop.engine.config import Project
from distloop.engine.examples import example_text
from distloop.engine.export import export_cluster
from distloop.engine.exports.base import cluster_name
from distloop.engine.exports.pods import DEFAULT_IMAGE
from distloop.engine.messages import (
    EvalMetrics,
    Log,
    RunFailed,
    RunFinished,
    RunStarted,
    StepMetrics,
)
from distloop.engine.process import EngineProcess, WarmEngine
from distloop.engine.project_file import load_project_data
from distloop.engine.run_model import RunModel
from distloop.engine.script_export import render_script

REPO = Path(__file__).resolve().parents[2]


def example_data(name: str = "seed") -> dict[str, Any]:
    return json.loads(example_text(name))


def run_engine(
    project: Project,
    run_dir: Path | None,
    timeout_s: float = 180,
    *,
    resume: bool = False,
    warm: WarmEngine | None = None,
) -> dict[str, Any]:
    """Runs a project in a real engine process (``warm``, if given); returns what it reported.

    ``model`` is the run's :class:`RunModel`, fed every message as the window feeds it.
    """
    engine = EngineProcess(project, run_dir, resume=resume, warm=warm)
    engine.start()
    model = RunModel(run_dir=run_dir)
    started, steps, losses, replicas, logs = None, [], [], [], []
    named: dict[str, list[float]] = {}
    evals: list[EvalMetrics] = []
    terminal = None
    try:
        import time

        deadline = time.monotonic() + timeout_s
        while not engine.done:
            assert time.monotonic() < deadline, "engine run timed out"
            for message in engine.poll(0.5):
                model.apply(message)
                if isinstance(message, RunStarted):
                    started = message
                elif isinstance(message, StepMetrics):
                    steps += message.steps
                    losses += message.losses
                    if message.replica_losses is not None:
                        replicas += message.replica_losses
                    for name, values in (message.named_losses or {}).items():
                        named.setdefault(name, []).extend(values)
                elif isinstance(message, EvalMetrics):
                    evals.append(message)
                elif isinstance(message, RunFinished | RunFailed):
                    terminal = message
                elif isinstance(message, Log):
                    logs.append(message)
    finally:
        engine.close()
    return {
        "started": started,
        "steps": steps,
        "losses": np.asarray(losses, dtype=np.float32),
        "replica_losses": np.asarray(replicas, dtype=np.float32),
        "named_losses": {name: np.asarray(v, dtype=np.float32) for name, v in named.items()},
        "evals": evals,
        "terminal": terminal,
        "logs": logs,
        "exit_code": engine.exit_code,
        "model": model,
    }


def guide_trace(timeout_s: float = 240) -> np.ndarray:
    """The losses of the hand-written guide program (``tests/support/reference_guide_loop.py``),
    run in its own process: the trace every engine path must reproduce."""
    reference = subprocess.run(
        [sys.executable, str(REPO / "tests" / "support" / "reference_guide_loop.py")],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=True,
    )
    return np.array([float(line) for line in reference.stdout.split()], dtype=np.float32)


def assert_same_trace(live: RunModel, loaded: RunModel) -> None:
    """A run followed live and the same run loaded from its folder hold the same trace.

    The files keep each loss as the float32 it was (``format_loss``) and times to the
    microsecond, so that is how closely they are compared.
    """
    a, b = live.trace, loaded.trace
    assert a.steps == b.steps
    np.testing.assert_array_equal(np.float32(a.losses), np.float32(b.losses))
    np.testing.assert_allclose(a.elapsed_s, b.elapsed_s, atol=1e-6)
    ours, theirs = a.replica_losses(), b.replica_losses()
    assert (ours is None) == (theirs is None)
    if ours is not None and theirs is not None:
        np.testing.assert_array_equal(np.float32(ours), np.float32(theirs))
    assert list(a.named_losses) == list(b.named_losses)
    for name, values in a.named_losses.items():
        np.testing.assert_array_equal(np.float32(values), np.float32(b.named_losses[name]))
    assert [step for step, _ in a.evaluations] == [step for step, _ in b.evaluations]
    for (_, ours), (_, theirs) in zip(a.evaluations, b.evaluations, strict=True):
        assert list(ours) == list(theirs)
        np.testing.assert_array_equal(
            np.float32(list(ours.values())), np.float32(list(theirs.values()))
        )


def distloop(*args: str, timeout_s: float = 240, **kwargs: Any) -> subprocess.CompletedProcess:
    """Runs the ``distloop`` command as a user would."""
    return subprocess.run(
        [sys.executable, "-m", "distloop.gui.launcher", *args],
        cwd=kwargs.pop("cwd", REPO),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        **kwargs,
    )


def synthetic_project(cpu_replicas: int, batch: int = 32, steps: int = 60, **training) -> dict:
    """Examples that all differ, shuffled, with regularization: invariance is not trivial."""
    return {
        "schema_version": 1,
        "name": f"invariance x{cpu_replicas}",
        "strategy": {"kind": "mirrored", "cpu_replicas": cpu_replicas},
        "model": {
            "input_shape": [6],
            "layers": [
                {
                    "kind": "dense",
                    "units": 16,
                    "activation": "tanh",
                    "kernel_regularizer": {"l1": 0.0, "l2": 0.001},
                },
                {"kind": "dense", "units": 3},
            ],
        },
        "optimizer": {"kind": "sgd", "learning_rate": 0.1, "momentum": 0.5},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "synthetic_classification",
            "examples": 512,
            "num_classes": 3,
            "global_batch_size": batch,
            "shuffle_buffer": 512,
            "seed": 3,
        },
        "training": {"steps": steps, "seed": 5, **training},
    }


HOSTILE_TEXTS = (
    'x"""\nPWNED = 1\n"""',
    "x'''\nPWNED = 1\n'''",
    "x\\",
    "a\rPWNED = 1",
    "x\n; PWNED=1 #",
    "$(PWNED) `PWNED` ; PWNED",
    "tab\there\x00nul\x1b[31m",
    "line\u2028sep\u2029para\x85next",
    "bidi \u202eDENWP\u202c",
    "\\N{BOGUS} \\x \\u12",
    "{PWNED} %(PWNED)s",
)
"""Texts that end a docstring, a string, a comment or a line, start a shell expansion or
turn an escape into something else, if a generator writes them raw; where code would
follow, it is named ``PWNED``."""


TEXT_FIELDS = ("name", "description", "path", "column", "eval_path", "key", "model_path")
"""The free texts of :func:`text_project`'s projects."""


def text_project(text: str = "plain", source: str = "csv", **texts: str) -> Project:
    """A two-worker cluster project whose free texts are ``text``, or each as ``texts``
    says: the name and description, and with ``source`` csv a CSV file's path and label
    column and an evaluation .npz's path and array names (``key``, ``key`` + "_y"); with
    tfrecord, a TFRecord pattern (``path``), its two features (``key``, and ``column`` +
    "_label", the label) and a .keras model file (``model_path`` + ".keras")."""
    fields = {name: text for name in TEXT_FIELDS} | texts
    data = example_data("regression")
    data["name"], data["description"] = fields["name"], fields["description"]
    data["model"]["input_shape"] = [3]
    if source == "csv":
        data["data"] = {
            "source": "csv",
            "path": fields["path"],
            "label_column": fields["column"],
            "global_batch_size": 4,
        }
        data["evaluation"] = {
            "every": 10,
            "source": {
                "source": "numpy",
                "path": fields["eval_path"],
                "features_key": fields["key"],
                "labels_key": fields["key"] + "_y",
                "global_batch_size": 4,
            },
        }
    else:
        model_path = fields["model_path"] + ".keras"
        data["loss"] = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
        data["model"] = {"kind": "keras_file", "path": model_path, "input_shape": [3]}
        label = fields["column"] + "_label"
        data["data"] = {
            "source": "tfrecord",
            "path": fields["path"],
            "features": [{"name": fields["key"], "shape": [3]}, {"name": label, "dtype": "int64"}],
            "label": label,
            "global_batch_size": 4,
        }
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {"cluster": {"worker": ["h1:2222", "h2:2222"]}, "task": {"type": "worker"}}
    return load_project_data(data)


def _blank_strings(value: Any) -> Any:
    """``value`` with every string in it emptied: its shape, which text must not change."""
    if isinstance(value, str):
        return ""
    if isinstance(value, dict):
        return {k: _blank_strings(v) for k, v in value.items()}  # keys are the generator's
    if isinstance(value, list):
        return [_blank_strings(v) for v in value]
    return value


def _code_shape(script: str) -> str:
    tree = ast.parse(script)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            node.value = ""
    return ast.dump(tree)


def yaml_documents(text: str) -> list[Any]:
    return list(yaml.load_all(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))


@functools.cache
def _plain_script_shape(source: str) -> str:
    return _code_shape(render_script(text_project(source=source)))


def assert_inert_script(project: Project) -> None:
    """The project's script is the plain project's program, its texts only in its literals:
    the same code with every string emptied, the name exactly in the docstring."""
    script = render_script(project)
    assert _code_shape(script) == _plain_script_shape(project.data.source)
    docstring = ast.get_docstring(ast.parse(script), clean=False)
    assert docstring is not None and docstring.startswith(f"{project.name}: a custom training")


@functools.cache
def _plain_export(fmt: str, image: str, source: str) -> dict[str, str]:
    """The files of the plain project's export by name; its shell scripts pass ``bash -n``."""
    with tempfile.TemporaryDirectory(prefix="distloop-plain-") as folder:
        files = export_cluster(text_project(source=source), Path(folder), fmt, image=image)
        for path in files:
            if path.suffix in (".sh", ".sbatch"):
                subprocess.run(["bash", "-n", str(path)], check=True, timeout=30)
        return {path.relative_to(folder).as_posix(): path.read_text("utf-8") for path in files}


def assert_inert_export(project: Project, folder: Path, fmt: str, image: str = DEFAULT_IMAGE):
    """Exported, the project's texts are data only: every file has the plain project's
    shape (shell scripts byte for byte, YAML documents with strings emptied, as many
    README lines), and the project reads back exactly from project.json and the ConfigMap."""
    files = export_cluster(project, folder, fmt, image=image)
    plain = _plain_export(fmt, image, project.data.source)
    assert [path.relative_to(folder).as_posix() for path in files] == list(plain)
    exported = json.loads((folder / "project.json").read_text(encoding="utf-8"))
    sent = json.loads(project.to_json())
    assert {k: v for k, v in exported.items() if k != "tf_config"} == {
        k: v for k, v in sent.items() if k != "tf_config"
    }  # k8s names the tasks by their pods
    for path, plain_text in zip(files, plain.values(), strict=True):
        text = path.read_text(encoding="utf-8")
        if path.suffix in (".sh", ".sbatch"):  # the same script, for its Slurm job's name
            job_name = f"--job-name={cluster_name(project)}\n"
            assert text.replace(job_name, "") == plain_text.replace(
                f"--job-name={cluster_name(text_project(source=project.data.source))}\n", ""
            )
        elif path.suffix == ".yaml":
            documents = yaml_documents(text)
            assert _blank_strings(documents) == _blank_strings(yaml_documents(plain_text))
            assert json.loads(documents[0]["data"]["project.json"]) == exported
        elif path.suffix == ".md":
            assert len(text.splitlines()) == len(plain_text.splitlines())
    return files


def model_run_folder(folder: Path, data: dict[str, Any]) -> Path:
    """A finished run's folder with an untrained model.keras of ``data``'s model: what
    prediction reads, made in seconds instead of by a run (imports TensorFlow)."""
    from distloop.engine.project_file import load_project_data
    from distloop.engine.tf.model import build_model

    project = load_project_data(data)
    folder.mkdir(parents=True)
    (folder / "project.json").write_text(project.to_json())
    build_model(project.model, 0).save(folder / "model.keras")
    return folder


def crafted_status_folders(root: Path) -> dict[Path, str]:
    """Run folders whose status.json cannot be read, with why the runs list says so.

    Each once stopped the window from starting and `distloop run` without --out (which
    reads every run's name): a status.json nested 100,000 deep (RecursionError), one
    that links to /dev/zero (read until the out-of-memory killer came), one of 2 MiB.
    """
    made = {
        root / "nested": ("[" * 100_000, "status.json nests too deeply"),
        root / "zero": (None, "status.json is a symbolic link"),
        root / "huge": (" " * (2 << 20), "status.json is larger than 1,048,576 bytes"),
    }
    for folder, (text, _) in made.items():
        folder.mkdir(parents=True)
        (folder / "project.json").write_text(json.dumps(example_data()))
        if text is None:
            (folder / "status.json").symlink_to("/dev/zero")
        else:
            (folder / "status.json").write_text(text)
    return {folder: f"cannot read this run folder: {why}" for folder, (_, why) in made.items()}


def full_device(path: Path) -> None:
    """``/dev/full``'s device node at ``path``: every write there fails with "no space left on
    device", a full disk for that one file (run folders follow no link to the real one)."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.stat("/dev/full").st_rdev)
    except OSError as exc:  # no /dev/full, or no right to make a device node (not root)
        pytest.skip(f"cannot make a /dev/full device node to simulate a full disk: {exc}")


def interrupt_after(project, run_dir, steps: int, *, kill: bool) -> None:
    """Starts a run and stops (or SIGKILLs) it once ``steps`` steps were reported."""
    engine = EngineProcess(project, run_dir)
    engine.start()
    try:
        seen = 0
        while seen < steps and not engine.done:
            seen += sum(len(m.steps) for m in engine.poll(0.2) if isinstance(m, StepMetrics))
        assert not engine.done, "the run ended before it could be interrupted"
        if kill:
            os.kill(engine.pid, signal.SIGKILL)
        else:
            engine.request_stop()
        while not engine.done:
            engine.poll(0.2)
    finally:
        engine.close()


GUIDE_STEP = '''
import tensorflow as tf


def train_step(step, inputs):
    """The guide's train_step, written out as a user would."""
    features, labels = inputs
    model, optimizer = step.models["model"], step.optimizers["model"]
    with tf.GradientTape() as tape:
        predictions = model(features, training=True)
        per_example_loss = step.loss_object(labels, predictions)
        data_loss = tf.nn.compute_average_loss(
            per_example_loss, global_batch_size=step.global_batch_size
        )
        loss = data_loss
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return RESULT
'''


CLI = [sys.executable, "-m", "distloop.gui.launcher"]
