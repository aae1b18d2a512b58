"""A trained model out: model.keras (best by val_loss), confusion.json, distloop predict."""

from __future__ import annotations

import json
import queue
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.messages import InputRefused, Predicted
from distloop.engine.prediction import (
    ClassChance,
    Prediction,
    PredictionError,
    PredictionResult,
    format_prediction,
    model_folder,
)
from distloop.engine.run_folder import read_eval, unknown_entries
from distloop.engine.synthetic import make_classification
from support.distloop_testing import distloop, example_data

FEATURES = [f"f{i}" for i in range(8)]


def validation_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Training examples with a third of their labels replaced at random, label column inside.

    The model learns the true labels, so val_loss first falls, then rises as it grows
    sure of the examples whose label was replaced: its lowest point is mid-run.
    """
    x, y = make_classification(256, [8], 4, 0.0, 1, "sparse_categorical_crossentropy")
    x, y = x[:45], y[:45].reshape(-1).astype(np.int64)
    rng = np.random.default_rng(7)
    replaced = rng.random(len(y)) < 0.35
    y[replaced] = rng.integers(0, 4, replaced.sum())
    header = [*FEATURES[:3], "label", *FEATURES[3:]]
    lines = [",".join(header)]
    for features, label in zip(x, y, strict=True):
        cells = [f"{value:.6f}" for value in features]
        lines.append(",".join([*cells[:3], str(label), *cells[3:]]))
    path.write_text("\n".join(lines) + "\n")
    table = np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float32)
    return np.delete(table, 3, axis=1), y


def classification_project() -> dict:
    return {
        "schema_version": 1,
        "name": "model out",
        "strategy": {"kind": "mirrored", "cpu_replicas": 2},
        "model": {
            "input_shape": [8],
            "layers": [
                {"kind": "dense", "units": 16, "activation": "relu"},
                {"kind": "dense", "units": 4},
            ],
        },
        "optimizer": {"kind": "adam", "learning_rate": 0.02},
        "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
        "data": {
            "source": "synthetic_classification",
            "examples": 256,
            "num_classes": 4,
            "global_batch_size": 32,
            "seed": 1,
        },
        "evaluation": {
            "every": 5,
            "source": {
                "source": "csv",
                "path": "val.csv",
                "label_column": "label",
                "global_batch_size": 16,
            },
        },
        "training": {"steps": 40, "seed": 0, "export_saved_model": True},
    }


@pytest.mark.slow
def test_a_run_saves_its_best_model_and_distloop_predict_reproduces_its_evaluation(
    tmp_path,
) -> None:
    features, labels = validation_csv(tmp_path / "val.csv")
    np.save(tmp_path / "val.npy", features[:5])
    np.save(tmp_path / "wrong.npy", np.zeros((2, 3), np.float32))
    (tmp_path / "p.json").write_text(json.dumps(classification_project()))
    run_dir = tmp_path / "run"
    run = distloop("run", str(tmp_path / "p.json"), "--out", str(run_dir), "--quiet")
    assert run.returncode == 0, run.stderr[-3000:]

    assert (run_dir / "model.keras").is_file()
    assert (run_dir / "saved_model" / "saved_model.pb").is_file()
    assert not list(run_dir.glob(".*tmp*"))
    assert unknown_entries(run_dir) == []  # all of it is what a run folder may hold
    evaluations = read_eval(run_dir)
    best = int(np.argmin(evaluations["val_loss"]))
    best_step = int(evaluations["step"][best])
    assert best_step not in (evaluations["step"][0], evaluations["step"][-1])  # a real choice
    record = json.loads((run_dir / "model.json").read_text())
    assert (record["step"], record["selected"]) == (best_step, "best_val_loss")

    predict = distloop(
        "predict",
        str(run_dir),
        str(tmp_path / "val.csv"),
        str(tmp_path / "val.npy"),
        str(tmp_path / "wrong.npy"),
        str(tmp_path / "missing.csv"),
        "--json",
    )
    assert predict.returncode == 1
    errors = predict.stderr.strip().splitlines()
    assert errors == [
        f"distloop: {tmp_path / 'wrong.npy'}: has shape [2, 3]; the model takes examples of "
        "shape [8] (one array of that shape, or a stack of them)",
        f"distloop: {tmp_path / 'missing.csv'}: cannot read it: No such file or directory",
    ]
    lines = [json.loads(line) for line in predict.stdout.splitlines()]
    rows, arrays = lines[:45], lines[45:]
    assert [row["input"] for row in rows] == [f"{tmp_path / 'val.csv'}:{n}" for n in range(2, 47)]
    assert [a["input"] for a in arrays] == [f"{tmp_path / 'val.npy'}[{i}]" for i in range(5)]
    probabilities = np.array([[row["classes"][str(c)] for c in range(4)] for row in rows])
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-6)
    # model.keras is the best evaluation's model: its loss and accuracy on the same data.
    loss = -np.mean(np.log(probabilities[np.arange(len(labels)), labels]))
    np.testing.assert_allclose(loss, evaluations["val_loss"][best], rtol=1e-5)
    predicted = np.array([int(row["class"]) for row in rows])
    assert np.mean(predicted == labels) == pytest.approx(evaluations["val_accuracy"][best])
    for array, row in zip(arrays, rows[:5], strict=True):
        assert array["class"] == row["class"]
        for name, value in array["classes"].items():
            assert value == pytest.approx(row["classes"][name], rel=1e-5)

    confusion = json.loads((run_dir / "confusion.json").read_text())
    expected = np.zeros((4, 4), np.int64)
    np.add.at(expected, (labels, predicted), 1)
    assert confusion["classes"] == ["0", "1", "2", "3"]
    assert confusion["matrix"] == expected.tolist()
    assert np.sum(confusion["matrix"]) == len(labels) == confusion["examples"]


def test_predict_without_a_model_says_so_in_one_line(tmp_path) -> None:
    (tmp_path / "model-generator.keras").write_bytes(b"")
    result = distloop("predict", str(tmp_path), "rows.csv")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        f"distloop: {tmp_path}: no model.keras in this run folder (it has "
        "model-generator.keras: custom code's models by name); a run saves it when it "
        "finishes or is stopped"
    ]
    assert result.stdout == ""


def test_a_cluster_run_s_model_is_its_chief_s(tmp_path) -> None:
    chief = tmp_path / "tasks" / "worker-0"
    chief.mkdir(parents=True)
    (chief / "model.keras").write_bytes(b"")
    assert model_folder(tmp_path) == chief
    with pytest.raises(PredictionError, match="no such run folder"):
        model_folder(tmp_path / "nothing")


def test_predictions_print_as_one_line_each() -> None:
    scores = tuple(
        ClassChance(name=name, probability=p)
        for name, p in [("cat", 0.9), ("dog", 0.06), ("fox", 0.04)]
    )
    assert format_prediction(Prediction(input="a.png", classes=scores), shown=2) == (
        "a.png: cat 0.9000  (dog 0.0600, +1 more)"
    )
    assert format_prediction(Prediction(input="x.npy[0]", values=(1.5, -2.0))) == "x.npy[0]: 1.5 -2"
    result = PredictionResult()
    result.add(Predicted(input="row 1", values=[0.5]))
    result.add(InputRefused(input="b.csv", error="is empty"))
    assert result.predictions == [Prediction(input="row 1", values=(0.5,))]
    assert result.errors == ["b.csv: is empty"]


def test_the_kept_model_is_the_lowest_val_loss_and_a_resume_keeps_it_unless_beaten(
    tmp_path,
) -> None:
    """In-process (a real Keras model, a real channel): which weights model.keras gets."""
    import tensorflow as tf
    from distloop.engine.channel import Channel
    from distloop.engine.loop_hooks import KeepModel
    from distloop.engine.project_file import load_project_data
    from distloop.engine.tf.model import build_model
    from distloop.engine.tf.model_export import ModelKeeper

    data = example_data("regression")
    data["evaluation"] = {"every": 5, "split": 0.1}
    project = load_project_data(data)
    model = build_model(project.model, 0)
    channel = Channel(queue.Queue(), None, tmp_path)

    def weights_of(step: int) -> None:
        model.set_weights([np.full(w.shape, step, w.dtype) for w in model.get_weights()])

    def segment(resumed_at: int | None, evaluations: dict[int, float]) -> None:
        keeper = ModelKeeper(
            tmp_path, {"model": model}, project, channel, chief=True, resumed_at=resumed_at
        )
        after_evaluation = KeepModel(keeper).on_evaluate
        for step, val_loss in evaluations.items():
            weights_of(step)
            after_evaluation(step, {"val_loss": val_loss, "val_mae": 0.0})
        keeper.save(max(evaluations))
        assert model.get_weights()[0].flat[0] == max(evaluations)  # training's weights back

    def saved_step() -> float:
        return tf.keras.models.load_model(tmp_path / "model.keras").get_weights()[0].flat[0]

    segment(None, {5: 1.0, 10: 0.5, 15: float("nan"), 20: 0.7})
    assert saved_step() == 10
    assert json.loads((tmp_path / "model.json").read_text()) == {
        "step": 10,
        "selected": "best_val_loss",
        "val_loss": 0.5,
    }
    segment(20, {25: 0.6, 30: 0.9})  # no lower val_loss: the first segment's model stays
    assert saved_step() == 10
    assert "model.keras keeps step 10 (val_loss 0.5)" in (tmp_path / "engine.log").read_text()
    segment(30, {35: 0.4})
    assert saved_step() == 35
    assert json.loads((tmp_path / "model.json").read_text())["step"] == 35
    assert not list(tmp_path.glob(".*tmp*"))
    channel.close()


def test_a_text_model_predicts_text_files_and_pasted_texts_as_training_read_them(
    tmp_path,
) -> None:
    """In-process: a text-folder model's folder loaded and asked, as the prediction process does.

    The words are numbered by the vocabulary the run saved, even after the data folder
    changed (here a text that makes "zebra" the most frequent word): learning it again
    would renumber every word and silently change the predictions.
    """
    from distloop.engine.project_file import load_project_data
    from distloop.engine.tf.data import load_text_for_model
    from distloop.engine.tf.data_sources.text_folder import text_vocabulary
    from distloop.engine.tf.model import build_model
    from distloop.engine.tf.predict import load_for_prediction

    for name, lines in {"en": ["the cat sat", "a dog ran"], "fr": ["le chat", "un chien"]}.items():
        (tmp_path / "texts" / name).mkdir(parents=True)
        for index, line in enumerate(lines):
            (tmp_path / "texts" / name / f"{index}.txt").write_text(line)
    data = example_data("classification")
    data["model"] = {"input_shape": [5], "layers": [{"kind": "dense", "units": 2}]}
    data["loss"] = {"kind": "sparse_categorical_crossentropy", "from_logits": True}
    data["data"] = {
        "source": "text_folder",
        "path": str(tmp_path / "texts"),
        "sequence_length": 5,
        "vocabulary_size": 20,
        "global_batch_size": 2,
    }
    project = load_project_data(data)
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "project.json").write_text(project.to_json())
    (folder / "classes.json").write_text('["en", "fr"]')
    trained_words = text_vocabulary(project)
    (folder / "vocabulary.json").write_text(json.dumps(trained_words))
    (tmp_path / "texts" / "en" / "9.txt").write_text("zebra zebra zebra zebra zebra cat")
    assert text_vocabulary(load_project_data(data))[2] == "zebra"
    model = build_model(project.model, 0)
    model.save(folder / "model.keras")
    (tmp_path / "new.txt").write_text("the cat ran")

    loaded = load_for_prediction(folder)
    result = PredictionResult(model=loaded.loaded)
    loaded.answer([tmp_path / "new.txt"], ["un chat"], result.add)
    assert result.model is not None and result.model.classes == ["en", "fr"]
    assert [p.input for p in result.predictions] == ["row 1", str(tmp_path / "new.txt")]
    for prediction, text in zip(result.predictions, ["un chat", "the cat ran"], strict=True):
        logits = model(load_text_for_model(text, project, trained_words)[np.newaxis]).numpy()[0]
        expected = np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum()
        got = {c.name: c.probability for c in prediction.classes or []}
        np.testing.assert_allclose([got["en"], got["fr"]], expected, rtol=1e-5)
