"""``stream: true`` reads CSV and .npz files as batches form: same examples, same order,
same evaluation split as loading them, without holding the file in memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from distloop.engine.config import load_project_data
from distloop.engine.synthetic import DataError


def _project(
    data: dict, evaluation: dict | None = None, loss: str = "sparse_categorical_crossentropy"
) -> dict:
    return {
        "schema_version": 1,
        "model": {"input_shape": [3], "layers": [{"kind": "dense", "units": 4}]},
        "loss": {"kind": loss, "from_logits": True},
        "data": {"global_batch_size": 7, "shuffle_buffer": 16, **data},
        "evaluation": evaluation,
        "training": {"epochs": 2, "seed": 3},
    }


def _arrays(seed: int = 0, rows: int = 45) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, 3)).astype(np.float32)
    return x, rng.integers(0, 4, (rows, 1))


def _batches(project: dict) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The training batches of two epochs, and the evaluation batches."""
    from distloop.engine.tf.data import build_eval_data, build_training_data

    loaded = load_project_data(project)
    training = [tuple(t.numpy() for t in batch) for batch in build_training_data(loaded).dataset]
    held = []
    if loaded.evaluation is not None:
        held = [tuple(t.numpy() for t in batch) for batch in build_eval_data(loaded)[0]]
    return training, held


def _same(a: list, b: list) -> None:
    assert len(a) == len(b)
    for (ax, ay), (bx, by) in zip(a, b, strict=True):
        np.testing.assert_array_equal(ax, bx)
        np.testing.assert_array_equal(ay, by)
        assert ax.dtype == bx.dtype and ay.dtype == by.dtype


@pytest.mark.parametrize("source", ["csv", "numpy"])
def test_streaming_gives_the_loaded_batches_and_split(tmp_path: Path, source: str) -> None:
    x, y = _arrays()
    if source == "csv":
        path = tmp_path / "t.csv"
        table = np.hstack([x, y.astype(np.float32)])
        np.savetxt(path, table, delimiter=",", header="a,b,c,label", comments="", fmt="%.9g")
        data = {"source": "csv", "path": str(path), "label_column": "label"}
    else:
        path = tmp_path / "t.npz"
        np.savez(path, x=x, y=y)
        data = {"source": "numpy", "path": str(path)}
    split = {"every": 1, "split": 0.2}
    loaded = _batches(_project(data, split))
    streamed = _batches(_project({**data, "stream": True}, split))
    _same(streamed[0], loaded[0])
    _same(streamed[1], loaded[1])
    assert sum(len(b[0]) for b in streamed[1]) == 9  # a fifth of 45 held out


def test_streaming_refuses_a_compressed_npz_naming_the_field(tmp_path: Path) -> None:
    from distloop.engine.tf.data import build_training_data

    x, y = _arrays()
    np.savez_compressed(tmp_path / "c.npz", x=x, y=y)
    project = load_project_data(
        _project({"source": "numpy", "path": str(tmp_path / "c.npz"), "stream": True})
    )
    with pytest.raises(DataError) as refused:
        build_training_data(project)
    assert str(refused.value) == (
        f"data.path: array 'x' in {tmp_path / 'c.npz'} is compressed (numpy.savez_compressed); "
        "streaming reads arrays in place, so save them with numpy.savez or set stream to false"
    )
