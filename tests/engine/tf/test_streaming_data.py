"""``stream: true`` reads CSV and .npz files as batches form: same examples, same order,
same evaluation split as loading them, without holding the file in memory."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.data_sources import DataError
from distloop.engine.project_file import load_project_data


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
        # Blank lines (one with a Windows line end, one at the end) are no rows, either way.
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join([*lines[:5], "\n", *lines[5:9], "\r\n", *lines[9:], "\n"]))
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


# --- TFRecord files --------------------------------------------------------------------


def _write_records(path: Path, x: np.ndarray, y: np.ndarray) -> None:
    import tensorflow as tf

    with tf.io.TFRecordWriter(str(path)) as writer:
        for features, label in zip(x, y, strict=True):
            example = tf.train.Example(
                features=tf.train.Features(
                    feature={
                        "x": tf.train.Feature(float_list=tf.train.FloatList(value=features)),
                        "label": tf.train.Feature(int64_list=tf.train.Int64List(value=label)),
                    }
                )
            )
            writer.write(example.SerializeToString())


def _tfrecord(path: Path, **changes: object) -> dict:
    return {
        "source": "tfrecord",
        "path": str(path),
        "features": [{"name": "x", "shape": [3]}, {"name": "label", "dtype": "int64"}],
        "label": "label",
        **changes,
    }


def test_tfrecord_files_give_the_arrays_batches_and_split(tmp_path: Path) -> None:
    x, y = _arrays(rows=45)
    _write_records(tmp_path / "part-0.tfrecord", x[:20], y[:20])
    _write_records(tmp_path / "part-1.tfrecord", x[20:], y[20:])
    np.savez(tmp_path / "same.npz", x=x, y=y[:, 0])
    split = {"every": 1, "split": 0.2}
    records = _batches(_project(_tfrecord(tmp_path / "part-*.tfrecord"), split))
    arrays = _batches(_project({"source": "numpy", "path": str(tmp_path / "same.npz")}, split))
    _same(records[0], arrays[0])
    _same(records[1], arrays[1])


def test_a_mismatched_tfrecord_spec_is_one_line_naming_the_entry(tmp_path: Path) -> None:
    from distloop.engine.tf.data import build_training_data

    x, y = _arrays(rows=4)
    _write_records(tmp_path / "r.tfrecord", x, y)
    file = tmp_path / "r.tfrecord"
    cases = {
        "data.features.0.name: the first record of {f} has no feature 'pixels' (it has label, x)": [
            {"name": "pixels", "shape": [3]},
            {"name": "label", "dtype": "int64"},
        ],
        (
            "data.features.1.dtype: 'label' holds int64 values in the first record of {f}, "
            "not float32"
        ): [
            {"name": "x", "shape": [3]},
            {"name": "label", "dtype": "float32"},
        ],
        "data.features.0.shape: [4] takes 4 value(s), but 'x' has 3 in the first record of {f}": [
            {"name": "x", "shape": [4]},
            {"name": "label", "dtype": "int64"},
        ],
    }
    for expected, features in cases.items():
        model = {
            "input_shape": [features[0].get("shape", [1])[0]],
            "layers": [{"kind": "dense", "units": 4}],
        }
        data = _project(_tfrecord(file, features=features))
        data["model"] = model
        if features[1]["dtype"] == "float32":
            data["loss"] = {"kind": "mean_squared_error"}
            data["model"]["layers"][0]["units"] = 1
        with pytest.raises(DataError) as refused:
            build_training_data(load_project_data(data))
        assert str(refused.value) == expected.format(f=file)
    later = tmp_path / "later.tfrecord"  # the third record has 4 values where 3 are expected
    _write_records(later, [*x[:2], np.arange(4, dtype=np.float32)], y[:3])
    with pytest.raises(DataError) as refused:
        build_training_data(load_project_data(_project(_tfrecord(later))))
    assert str(refused.value) == (
        f"data.features.0.shape: [3] takes 3 value(s), but 'x' has 4 in record 2 of {later}"
    )
    with pytest.raises(DataError) as refused:
        build_training_data(load_project_data(_project(_tfrecord(tmp_path / "none-*.tfrecord"))))
    assert str(refused.value) == f"data.path: no file matches {tmp_path / 'none-*.tfrecord'}"
    text = tmp_path / "text.tfrecord"
    text.write_text("not records\n" * 20)
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(file.read_bytes()[:-7])
    packed = tmp_path / "packed.tfrecord"
    packed.write_bytes(gzip.compress(file.read_bytes()))
    refusals = {}
    for path, compression in ((text, "none"), (cut, "none"), (text, "GZIP"), (packed, "none")):
        with pytest.raises(DataError) as refused:
            spec = {**_tfrecord(path), "compression": compression}
            build_training_data(load_project_data(_project(spec)))
        refusals[path.name, compression] = str(refused.value)
    assert refusals == {
        ("text.tfrecord", "none"): f"data.path: {text} is not a TFRecord file; choose TFRecord "
        "files (or, for compressed ones, set data.compression to GZIP or ZLIB)",
        ("cut.tfrecord", "none"): f"data.path: {cut} is cut short or damaged after record 2 "
        "(record 3 declares 41 bytes, more than the file holds); write it again, or remove it "
        "from the pattern",
        ("text.tfrecord", "GZIP"): f"data.path: {text} is not a GZIP-compressed TFRecord file; "
        "set data.compression to how the files were written",
        ("packed.tfrecord", "none"): f"data.path: {packed} is not a TFRecord file; choose "
        "TFRecord files (or, for compressed ones, set data.compression to GZIP or ZLIB)",
    }


def test_tfrecord_spec_checks_before_a_run() -> None:
    from distloop.engine.problems import ProblemsError

    def problems(**changes: object) -> list[str]:
        try:
            load_project_data(_project(_tfrecord(Path("r.tfrecord"), **changes)))
        except ProblemsError as exc:
            return [str(p) for p in exc.problems]
        return []

    assert problems() == []
    assert problems(label="y") == [
        "data.label: 'y' is not one of the features (x, label); name the feature that holds "
        "the label"
    ]
    assert problems(
        features=[{"name": "x", "shape": [2]}, {"name": "label", "dtype": "int64"}]
    ) == [
        "data.features: the features other than the label hold 2 value(s) per example, but "
        "model.input_shape [3] takes 3"
    ]
    assert problems(features=[{"name": "x", "shape": [3]}, {"name": "label"}]) == [
        "data.features.1: sparse_categorical_crossentropy takes one class number per example: "
        "give the label feature dtype int64 and shape []"
    ]


def test_a_streamed_csv_names_its_first_bad_row_before_the_run(tmp_path: Path) -> None:
    """TensorFlow's CSV parser names no line; the run would fail inside its step."""
    from distloop.engine.tf.data import build_training_data

    path = tmp_path / "t.csv"
    for body, expected in [
        (
            "1,2,3,0\n4,x,6,1\n",
            "line 3, column 'b': 'x' is not a finite number; fill or remove that row",
        ),
        (
            "1,2,3,0\n4,5,nan,1\n",
            "line 3, column 'c': 'nan' is not a finite number; fill or remove that row",
        ),
        ("1,2,3,0\n4,5,6\n", "line 3 has 3 value(s), but the header names 4 columns"),
        (
            "1,2,3,0\n\n4,x,6,1\n",
            "line 4, column 'b': 'x' is not a finite number; fill or remove that row",
        ),
    ]:
        path.write_text(f"a,b,c,label\n{body}")
        data = {"source": "csv", "path": str(path), "label_column": "label", "stream": True}
        with pytest.raises(DataError) as refused:
            build_training_data(load_project_data(_project(data)))
        assert str(refused.value) == f"data.path: {path} {expected}"


def test_a_streamed_npz_is_refused_as_loading_refuses_it(tmp_path: Path) -> None:
    """NaN features and labels outside the model's classes: the same line either way."""
    from distloop.engine.tf.data import build_training_data

    x, y = _arrays(rows=70_000)  # past one check chunk: example numbers count from the file
    bad_features = x.copy()
    bad_features[66_000, 1] = np.nan
    bad_labels = y.copy()
    bad_labels[69_999] = 4
    for name, (features, labels) in {"nan": (bad_features, y), "class": (x, bad_labels)}.items():
        path = tmp_path / f"{name}.npz"
        np.savez(path, x=features, y=labels)
        messages = []
        for stream in (False, True):
            data = {"source": "numpy", "path": str(path), "stream": stream}
            with pytest.raises(DataError) as refused:
                build_training_data(load_project_data(_project(data)))
            messages.append(str(refused.value))
        assert messages[0] == messages[1]
        assert ("example 66000" if name == "nan" else "example 69999") in messages[1]


def test_the_check_of_a_streamed_npz_holds_a_bounded_part_of_wide_rows(tmp_path: Path) -> None:
    """Checking every value reads the file in parts of bounded bytes, not of a fixed number
    of rows: 65,536 rows of 4,096 float32 features were a 1 GiB part, which killed a run
    under a 1.5 GiB memory limit before its first step."""
    import tracemalloc

    from distloop.engine.tf.data_sources.numpy import npz_batches

    x = np.random.default_rng(0).random((4096, 4096), dtype=np.float32)  # 64 MiB
    np.savez(tmp_path / "wide.npz", x=x, y=np.zeros((4096, 1), np.float32))
    project = load_project_data(
        {
            **_project({"source": "numpy", "path": str(tmp_path / "wide.npz"), "stream": True}),
            "model": {"input_shape": [4096], "layers": [{"kind": "dense", "units": 1}]},
            "loss": {"kind": "binary_crossentropy", "from_logits": True},
        }
    )
    tracemalloc.start()  # numpy reports its arrays' memory to tracemalloc
    try:
        npz_batches(project.data, project)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < x.nbytes / 2


def test_a_streamed_csv_refuses_labels_as_loading_does(tmp_path: Path) -> None:
    from distloop.engine.tf.data import build_training_data

    path = tmp_path / "t.csv"
    for labels in ("0\n1.5", "0\n4"):  # not whole; no class 4 among the model's 4 units
        first, second = labels.split("\n")
        path.write_text(f"a,b,c,label\n1,2,3,{first}\n4,5,6,{second}\n")
        messages = []
        for stream in (False, True):
            data = {"source": "csv", "path": str(path), "label_column": "label", "stream": stream}
            with pytest.raises(DataError) as refused:
                build_training_data(load_project_data(_project(data)))
            messages.append(str(refused.value))
        assert messages[0] == messages[1]
        assert messages[1].startswith(f"data.label_column: label {second} in {path} (example 1,")


def test_a_tfrecord_pattern_that_matches_nothing_is_a_problem_before_run(tmp_path: Path) -> None:
    from distloop.engine.data_sources.checks import project_folder_problems

    project = load_project_data(_project(_tfrecord(tmp_path / "train-*.tfrecord")))
    assert [str(p) for p in project_folder_problems(project)] == [
        f"data.path: no file matches {tmp_path / 'train-*.tfrecord'}"
    ]
    _write_records(tmp_path / "train-0.tfrecord", *_arrays(rows=2))
    assert project_folder_problems(project) == []


def test_a_streamed_csv_names_the_lines_its_parser_cannot_take(tmp_path: Path) -> None:
    """Blocks of lines are split at line feeds: a quoted line break in a header name is
    skipped over, one in a cell, or lines ended by a carriage return alone, are one line
    saying so. A number beyond float32 is named as loading names it (it was "cannot be
    read as CSV numbers": Python's float took it)."""
    from distloop.engine.tf.data import build_training_data

    path = tmp_path / "t.csv"
    data = {"source": "csv", "path": str(path), "label_column": "label", "stream": True}
    path.write_bytes(b'"a\nx",b,c,label\r\n1,2,3,0\r\n4,5,6,1\r\n')
    assert build_training_data(load_project_data(_project(data))).examples == 2
    for body, expected in [
        (
            b'a,b,c,label\n1,2,3,0\n4,"5\n",6,1\n',
            "line 4, column 'b': '5\\n' holds a line break, which streaming cannot read; "
            "remove it, or set stream to false",
        ),
        (
            b"a,b,c,label\r1,2,3,0\r",
            "ends its lines with a carriage return alone (classic Mac OS), which streaming "
            "cannot split; save it with Unix (LF) or Windows (CR LF) line ends, or set stream "
            "to false",
        ),
        (
            b"a,b,c,label\n1,2,3,0\n4,1e39,6,1\n",
            "line 3, column 'b': '1e39' is not a finite number; fill or remove that row",
        ),
    ]:
        path.write_bytes(body)
        with pytest.raises(DataError) as refused:
            build_training_data(load_project_data(_project(data)))
        assert str(refused.value) == f"data.path: {path} {expected}"
