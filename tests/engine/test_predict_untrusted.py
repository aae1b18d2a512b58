"""Prediction on inputs and run folders from elsewhere: every input answered on its own
line, a model prediction cannot run is one line, and an unexpected failure is a typed
message, never a traceback (real ``distloop predict`` processes on crafted files)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.child_main import predict_main
from distloop.engine.child_process import ChildProcess
from distloop.engine.messages import ModelLoaded, RunFailed
from support.distloop_testing import distloop, example_data, model_run_folder

FEATURES = 8


def classifier_folder(root: Path) -> Path:
    """The classification example's model (8 features, 4 classes) in a run folder."""
    return model_run_folder(root / "run", example_data("classification"))


def npy_header(shape: tuple[int, ...]) -> bytes:
    handle = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        handle, {"descr": "<f4", "fortran_order": False, "shape": shape}
    )
    return handle.getvalue()


def crafted_inputs(folder: Path) -> dict[str, Path]:
    """One good array and CSV beside the bad inputs the issue found, each a file of its own."""
    folder.mkdir()
    paths = {name: folder / name for name in ("good.npy", "good.csv")}
    np.save(paths["good.npy"], np.ones((2, FEATURES), np.float32))
    paths["good.csv"].write_text(",".join(["0.5"] * FEATURES) + "\n")
    bad = {
        # 193 bytes declaring 10^11 values: allocating them was a MemoryError, all lost
        "huge.npy": npy_header((10**11, 1)) + b"\0" * 65,
        "corrupt.npy": b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'shape': (2, 8), }" + b" " * 9,
        "random.png": bytes(range(256)),
    }
    for name, contents in bad.items():
        paths[name] = folder / name
        paths[name].write_bytes(contents)
    paths["empty.npy"] = folder / "empty.npy"
    np.save(paths["empty.npy"], np.zeros((0, FEATURES), np.float32))
    paths["complex.npy"] = folder / "complex.npy"
    np.save(paths["complex.npy"], np.full((1, FEATURES), 1 + 2j))
    paths["fifo.csv"] = folder / "fifo.csv"
    os.mkfifo(paths["fifo.csv"])  # opening it to read would wait for a writer forever
    return paths


@pytest.mark.slow
def test_each_bad_input_is_refused_on_its_own_line_and_the_others_are_predicted(
    tmp_path: Path,
) -> None:
    run_dir = classifier_folder(tmp_path)
    # 100,000 levels of nesting: reading it was a RecursionError that ended the prediction
    (run_dir / "classes.json").write_text("[" * 100_000 + "]" * 100_000)
    paths = crafted_inputs(tmp_path / "inputs")
    result = distloop("predict", str(run_dir), *map(str, paths.values()), "--json")

    assert result.returncode == 1
    assert "Traceback" not in result.stderr + result.stdout
    predicted = [json.loads(line) for line in result.stdout.splitlines()]
    assert [item["input"] for item in predicted] == [
        f"{paths['good.npy']}[0]",
        f"{paths['good.npy']}[1]",
        f"{paths['good.csv']}:1",
    ]
    assert all(sorted(item["classes"]) == ["0", "1", "2", "3"] for item in predicted)
    refused = dict(line.split(": ", 2)[1:] for line in result.stderr.strip().splitlines())
    bad = ("huge.npy", "corrupt.npy", "random.png", "empty.npy", "complex.npy", "fifo.csv")
    assert sorted(refused) == sorted(str(paths[name]) for name in bad)
    assert refused[str(paths["huge.npy"])].startswith(
        "declares an array of shape [100000000000, 1] (400000000000 bytes) but holds 65 bytes"
    )
    assert refused[str(paths["corrupt.npy"])].startswith("cannot read it as .npy: ")
    assert refused[str(paths["empty.npy"])] == "holds no examples (shape [0, 8])"
    assert refused[str(paths["complex.npy"])] == "holds complex numbers; the model takes real ones"
    assert refused[str(paths["fifo.csv"])] == "is not a regular file"


def unsupported_models() -> dict[str, object]:
    """Models prediction cannot run, as a shared run folder may hold them."""
    import tensorflow as tf

    keras = tf.keras
    open_size = keras.Input((None, 1))
    first, second = keras.Input((4,)), keras.Input((4,))
    one = keras.Input((4,))
    return {
        "open": keras.Model(open_size, keras.layers.Dense(1)(open_size)),
        "two inputs": keras.Model([first, second], keras.layers.Concatenate()([first, second])),
        "two outputs": keras.Model(one, [keras.layers.Dense(1)(one), keras.layers.Dense(2)(one)]),
    }


@pytest.mark.slow
def test_a_model_prediction_cannot_run_is_one_line(tmp_path: Path) -> None:
    """In-process for each model (a real Keras load), and once through ``distloop predict``."""
    from distloop.engine.tf.predict import InputError, load_for_prediction

    expected = {
        "open": "the model takes examples of shape [None, 1], a size left open; prediction "
        "needs every size but the batch's",
        "two inputs": "the model takes 2 input(s) and gives 1 output(s); prediction runs models "
        "of one input and one output",
        "two outputs": "the model takes 1 input(s) and gives 2 output(s); prediction runs models "
        "of one input and one output",
    }
    folders = {}
    for name, model in unsupported_models().items():
        folders[name] = tmp_path / name
        folders[name].mkdir()
        model.save(folders[name] / "model.keras")
        with pytest.raises(InputError) as refused:
            load_for_prediction(folders[name])
        assert str(refused.value) == f"{folders[name] / 'model.keras'}: {expected[name]}"

    (tmp_path / "x.csv").write_text("1\n")
    result = distloop("predict", str(folders["open"]), str(tmp_path / "x.csv"))
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"distloop: {folders['open']}: {folders['open'] / 'model.keras'}: {expected['open']}"
    ]


@pytest.mark.slow
def test_an_unexpected_failure_in_the_prediction_process_is_a_typed_message(
    tmp_path: Path,
) -> None:
    """A request the process cannot take (here: not a request at all) is a RunFailed."""
    run_dir = classifier_folder(tmp_path)
    child = ChildProcess(predict_main, str(run_dir), name="distloop-predict")
    try:
        assert isinstance(child.receive(120), ModelLoaded)
        child.send(ModelLoaded(path="x", input_shape=[1], classifier=False))
        failed = child.receive(60)
        assert isinstance(failed, RunFailed)
        assert failed.error_type == "ProtocolError"
        assert failed.message == "a prediction process takes requests, not model_loaded"
        child.join(30)
        assert child.exitcode == 0
    finally:
        child.close()
