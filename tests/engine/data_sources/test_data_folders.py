"""Image folders: the TF-free scanner and checks, then the pipeline, then a real run.

The scanner and the project checks are what the window shows before Run, so each
bad folder a user could bring (one class, an empty class, no subfolders, a cut-short
file) must give one line naming the field. The last test runs the real engine on a
generated folder with two CPU replicas.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from distloop.engine.config import ImageFolderData, Project
from distloop.engine.data_sources.checks import project_folder_problems, unreadable_image_problems
from distloop.engine.data_sources.folders import image_file_problem, scan_folder
from distloop.engine.messages import RunFinished
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from support.data_folders import image_project, png_bytes, write_image_folder
from support.distloop_testing import distloop, run_engine


def problems_of(data: dict) -> list[str]:
    try:
        project = load_project_data(data)
    except ProblemsError as exc:
        return [str(problem) for problem in exc.problems]
    return [str(problem) for problem in project_folder_problems(project)]


# --- the scanner -----------------------------------------------------------------------


def test_scan_lists_classes_in_sorted_order_with_their_images(tmp_path: Path) -> None:
    write_image_folder(tmp_path, classes=("b", "a"), per_class=2)
    (tmp_path / "a" / "nested").mkdir()
    (tmp_path / "a" / "nested" / "deep.png").write_bytes(png_bytes(np.zeros((2, 2))))
    (tmp_path / "a" / "notes.txt").write_text("not an image")
    (tmp_path / "a" / ".hidden.png").write_bytes(b"")
    (tmp_path / ".cache").mkdir()
    scan = scan_folder(tmp_path)
    assert scan.classes == ("a", "b")
    assert scan.counts() == {"a": 3, "b": 2}
    assert [(p.relative_to(tmp_path).as_posix(), label) for p, label in scan.files] == [
        ("a/000.png", 0),
        ("a/001.png", 0),
        ("a/nested/deep.png", 0),
        ("b/000.png", 1),
        ("b/001.png", 1),
    ]
    assert [p.name for p in scan.others] == ["notes.txt"]


@pytest.mark.parametrize(
    ("layout", "expected"),
    [
        ({"only": 3}, "has one class folder (only); a classifier needs at least two"),
        ({"cat": 2, "dog": 0}, "class folder(s) dog hold no images"),
        ({}, "has no subfolders; put each class's images in a subfolder"),
        ({"cat": 0, "dog": 0}, "holds no images (.bmp .gif .jpeg .jpg .png)"),
    ],
)
def test_bad_folders_are_one_line_naming_data_path(
    tmp_path: Path, layout: dict[str, int], expected: str
) -> None:
    for name, count in layout.items():
        (tmp_path / name).mkdir()
        for index in range(count):
            (tmp_path / name / f"{index}.png").write_bytes(png_bytes(np.zeros((8, 8))))
    (tmp_path / "loose.png").write_bytes(png_bytes(np.zeros((8, 8))))
    found = problems_of(image_project(tmp_path))
    assert len(found) == 1
    assert found[0].startswith(f"data.path: {tmp_path}")
    assert expected in found[0]
    assert "\n" not in found[0]


def test_other_files_are_named_when_a_class_has_no_images(tmp_path: Path) -> None:
    write_image_folder(tmp_path, classes=("a", "b"), per_class=1)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "scan.tiff").write_bytes(b"II*\x00")
    (found,) = problems_of(image_project(tmp_path, model=_model(3)))
    assert "class folder(s) c hold no images" in found
    assert "other files such as c/scan.tiff are not read" in found


def test_missing_folder_and_a_file_are_named(tmp_path: Path) -> None:
    assert problems_of(image_project(tmp_path / "nowhere")) == [
        f"data.path: {tmp_path / 'nowhere'} does not exist; choose a folder of class subfolders"
    ]
    (tmp_path / "f.png").write_bytes(b"x")
    (found,) = problems_of(image_project(tmp_path / "f.png"))
    assert found.startswith("data.path: ") and "is a file" in found


def _model(units: int, shape: list[int] | None = None) -> dict:
    return {"input_shape": shape or [8, 8, 1], "layers": [{"kind": "dense", "units": units}]}


def test_model_and_loss_must_fit_the_classes(tmp_path: Path) -> None:
    write_image_folder(tmp_path, per_class=1)  # three classes
    assert problems_of(image_project(tmp_path, model=_model(4))) == [
        "model.layers: sparse_categorical_crossentropy needs a last dense layer of 3 units, one "
        "per class folder in data.path, not 4"
    ]
    binary = {"kind": "binary_crossentropy", "from_logits": True}
    assert problems_of(image_project(tmp_path, model=_model(1), loss=binary)) == [
        "loss.kind: binary_crossentropy takes two classes, but data.path has 3; use "
        "sparse_categorical_crossentropy with a last dense layer of 3 units"
    ]
    assert problems_of(image_project(tmp_path, model=_model(3, [64]))) == [
        "model.input_shape: image data needs [height, width, channels] with 1 (grayscale) or 3 "
        "(rgb) channels, not [64]"
    ]
    (found,) = problems_of(image_project(tmp_path, data={"color_mode": "rgb"}))
    assert found.startswith("data.color_mode: rgb images have 3 channel(s)")
    (found,) = problems_of(image_project(tmp_path, loss={"kind": "mean_squared_error"}))
    assert found.startswith("loss.kind: mean_squared_error is a regression loss")


def test_an_evaluation_folder_must_have_the_training_classes(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "train", per_class=1)
    write_image_folder(tmp_path / "val", classes=("circle", "square", "star"), per_class=1)
    source = {"source": "image_folder", "path": str(tmp_path / "val")}
    found = problems_of(
        image_project(tmp_path / "train", evaluation={"every": 5, "source": source})
    )
    assert found == [
        "evaluation.source.path: its classes (circle, square, star) are not the training data's "
        "(circle, square, triangle); class numbers would mean different classes"
    ]


def test_image_file_problem_reads_only_the_ends(tmp_path: Path) -> None:
    good = png_bytes(np.zeros((4, 4)))
    cases = {
        "good.png": (good, None),
        "empty.png": (b"", "is empty"),
        "cut.png": (good[:-20], "is cut short (PNG)"),
        "text.jpg": (b"hello, world", "is not a JPEG, PNG, GIF or BMP image"),
        "cut.jpg": (b"\xff\xd8\xff\xe0" + b"\x00" * 100 + b"\x12", "is cut short (JPEG)"),
        "padded.jpg": (b"\xff\xd8\xff\xe0" + b"\x01" * 100 + b"\xff\xd9\x00\x00", None),
        "cut.gif": (b"GIF89a" + b"\x01" * 20, "is cut short (GIF)"),
        "cut.bmp": (b"BM" + (5000).to_bytes(4, "little") + b"\x00" * 50, "is cut short (BMP)"),
    }
    for name, (content, expected) in cases.items():
        (tmp_path / name).write_bytes(content)
        assert image_file_problem(tmp_path / name) == expected, name


def test_old_projects_stay_valid_and_the_new_source_round_trips(tmp_path: Path) -> None:
    project = load_project_data(image_project(tmp_path, data={"flip": True, "rotation": 5.0}))
    again = Project.model_validate_json(project.to_json())
    assert again == project
    assert again.data.on_bad_file == "fail" and again.data.color_mode == "auto"
    assert again.data.crop == 0.0


def test_validate_names_a_one_class_folder_in_one_line(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "pics", classes=("cat",), per_class=2)
    project_file = tmp_path / "project.json"
    project_file.write_text(json.dumps(image_project(Path("pics"))))  # relative to the file
    result = distloop("validate", str(project_file), timeout_s=60)
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert lines[-1].strip() == (
        f"data.path: {tmp_path / 'pics'} has one class folder (cat); a classifier needs at "
        "least two, one subfolder of images per class"
    )
    assert "Traceback" not in result.stderr
    # run says the same before TensorFlow starts, and leaves no failed run folder behind
    run = distloop("run", str(project_file), "--out", str(tmp_path / "run"), timeout_s=60)
    assert run.returncode == 1 and run.stderr.strip().splitlines()[-1] == lines[-1]
    assert not (tmp_path / "run").exists()


def test_validate_names_an_unreadable_image_the_run_would_fail_on(tmp_path: Path) -> None:
    """``validate`` said valid for a folder with an empty file, and the run then failed."""
    write_image_folder(tmp_path / "pics", per_class=2)
    empty, cut = tmp_path / "pics" / "circle" / "empty.png", tmp_path / "pics" / "square" / "c.png"
    empty.write_bytes(b"")
    cut.write_bytes(png_bytes(np.zeros((8, 8)))[:30])
    project_file = tmp_path / "project.json"
    project_file.write_text(json.dumps(image_project(tmp_path / "pics")))
    result = distloop("validate", str(project_file), timeout_s=60)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.strip().splitlines()[-1].strip() == (
        f"data.path: {empty} is empty (1 more unreadable); replace or remove it, or set "
        "data.on_bad_file to skip"
    )
    skipping = load_project_data(image_project(tmp_path / "pics", data={"on_bad_file": "skip"}))
    assert unreadable_image_problems(skipping) == (
        [],
        [
            f"data.path: 2 unreadable image(s) will be skipped (data.on_bad_file is skip): "
            f"{empty} is empty and 1 more"
        ],
    )


# --- the pipeline (TensorFlow in this process) -----------------------------------------


def test_fail_mode_names_the_unreadable_file_and_skip_mode_counts_it(tmp_path: Path) -> None:
    from distloop.engine.data_sources import DataError
    from distloop.engine.tf.data_sources.image_folder import image_files

    write_image_folder(tmp_path, per_class=2)
    bad = tmp_path / "square" / "broken.png"
    bad.write_bytes(png_bytes(np.zeros((8, 8)))[:30])
    project = load_project_data(image_project(tmp_path))
    with pytest.raises(DataError) as failed:
        image_files(project.data)
    assert str(failed.value) == (
        f"data.path: {bad} is cut short (PNG); replace or remove it, or set data.on_bad_file "
        "to skip"
    )
    skipping = project.data.model_copy(update={"on_bad_file": "skip"})
    files = image_files(skipping)
    assert len(files.paths) == 6 and str(bad) not in files.paths
    assert files.skip_warning("data.path") == (
        f"data.path: skipped 1 unreadable image(s) (data.on_bad_file is skip): {bad} is cut "
        "short (PNG)"
    )
    assert bad.exists()  # nothing a user made is touched


def test_damage_inside_a_whole_file_is_named_before_the_run(tmp_path: Path) -> None:
    """A file with a sound start and end but damaged data inside fails the decoder, which
    inside the training step names no file: it is found (and named) before the run."""
    from distloop.engine.data_sources import DataError
    from distloop.engine.tf.data_sources.image_folder import image_files

    write_image_folder(tmp_path, per_class=2)
    damaged = tmp_path / "circle" / "001.png"
    content = bytearray(damaged.read_bytes())
    content[40:60] = bytes(b ^ 0xFF for b in content[40:60])
    damaged.write_bytes(bytes(content))
    project = load_project_data(image_project(tmp_path))
    with pytest.raises(DataError) as failed:
        image_files(project.data)
    assert str(failed.value) == (
        f"data.path: {damaged} cannot be decoded (its image data is damaged); replace or "
        "remove it, or set data.on_bad_file to skip"
    )
    skipping = image_files(project.data.model_copy(update={"on_bad_file": "skip"}))
    assert len(skipping.paths) == 5 and str(damaged) not in skipping.paths


@pytest.mark.parametrize("size", [(6, 10), (4, 5)], ids=["resized", "model-sized"])
def test_training_batches_match_load_image_for_model(tmp_path: Path, size: tuple[int, int]) -> None:
    """Prediction preprocesses one image exactly as training does (here RGB), whether the
    pipeline resizes or, every image having the model's size, leaves the resize out."""
    import tensorflow as tf
    from distloop.engine.tf.data import build_eval_data, build_training_data, load_image_for_model
    from distloop.engine.tf.data_sources.image_folder import image_decoder, image_files

    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for index in range(3):
            pixels = rng.integers(0, 256, (*size, 3))
            (tmp_path / name / f"{index}.png").write_bytes(png_bytes(pixels))
    data = {"global_batch_size": 3}
    model = _model(2, [4, 5, 3])
    project = load_project_data(
        image_project(tmp_path, data=data, model=model, evaluation={"every": 1, "split": 0.34})
    )
    assert isinstance(project.data, ImageFolderData)
    folder = image_files(project.data)
    assert folder.sizes == {size}
    decode, _ = image_decoder(project.data, project, folder)
    pixels, _ = decode(tf.constant(folder.paths[0]), 0)
    assert pixels.dtype == (tf.float32 if size == (6, 10) else tf.uint8)
    training = build_training_data(project)
    assert training.classes == ("a", "b") and training.examples == 4
    images, labels = next(iter(training.dataset))
    assert images.shape == (3, 4, 5, 3) and float(images.numpy().max()) <= 1.0
    held, held_count = build_eval_data(project)
    assert held_count == 2
    files = sorted(tmp_path.glob("*/*.png"))
    singles = {f: load_image_for_model(f, project) for f in files}
    batches = np.concatenate([x.numpy() for x, _ in held] + [images.numpy()])
    for image in batches:  # every batch image is exactly one file's preprocessing
        assert any(np.array_equal(image, single) for single in singles.values())
    assert np.array_equal(load_image_for_model(files[0].read_bytes(), project), singles[files[0]])
    assert labels.dtype == np.int32


def test_an_image_replaced_by_another_size_during_a_run_is_named(tmp_path: Path) -> None:
    """The pipeline leaves the resize out when every image had the model's size before the
    run; one replaced since by another size stopped the run with TensorFlow's shape error,
    which names no file."""
    import tensorflow as tf
    from distloop.engine.tf.data import changed_file_error
    from distloop.engine.tf.data_sources.image_folder import image_decoder, image_files

    write_image_folder(tmp_path, classes=("a", "b"), per_class=2, size=8)
    project = load_project_data(image_project(tmp_path, model=_model(2)))
    assert isinstance(project.data, ImageFolderData)
    folder = image_files(project.data)
    assert folder.sizes == {(8, 8)}
    decode, _ = image_decoder(project.data, project, folder)
    replaced = Path(folder.paths[1])
    replaced.write_bytes(png_bytes(np.random.default_rng(1).integers(0, 256, (12, 20))))
    with pytest.raises(tf.errors.InvalidArgumentError) as failed:
        decode(tf.constant(str(replaced)), 0)
    assert str(changed_file_error(project, failed.value)) == (
        f"data.path: {replaced} was replaced during the run by an image of another size than "
        "the model's 8x8 (every image had that size when the run started); resume the run: it "
        "goes on from its last checkpoint and resizes the images that need it"
    )


def test_an_image_removed_or_damaged_during_a_run_is_named(tmp_path: Path) -> None:
    """TensorFlow's own error, raised from inside the step, names a graph node: the run
    failed with a traceback. The file is found and named instead."""
    import tensorflow as tf
    from distloop.engine.tf.data import build_training_data, changed_file_error

    write_image_folder(tmp_path, classes=("a", "b"), per_class=4)
    project = load_project_data(image_project(tmp_path, model=_model(2)))
    training = build_training_data(project)
    gone = tmp_path / "a" / "001.png"
    kept = gone.read_bytes()
    gone.unlink()
    with pytest.raises(tf.errors.OpError) as failed:
        next(iter(training.dataset))
    then = "then resume the run: it goes on from its last checkpoint"
    assert str(changed_file_error(project, failed.value)) == (
        f"data.path: {gone} was removed during the run; put it back, {then}"
    )
    gone.write_bytes(kept)
    other_error = tf.errors.InvalidArgumentError(None, None, "Input is empty.")
    assert changed_file_error(project, other_error) is None  # every image still reads
    damaged = tmp_path / "b" / "002.png"  # the ends of a PNG, no image between them
    damaged.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(40) + b"IEND\xaeB`\x82")
    assert str(changed_file_error(project, other_error)) == (
        f"data.path: {damaged} cannot be decoded (its image data is damaged) since the run "
        f"started; replace or remove it, {then}"
    )


def test_prediction_says_what_is_wrong_with_an_image_or_a_folder(tmp_path: Path) -> None:
    """``distloop predict`` and Try it name a cut-short or empty image as the training
    check does, and a folder given for a file as a folder."""
    import tensorflow as tf
    from distloop.engine.data_sources import DataError
    from distloop.engine.tf.predict import InputError, ModelInputs, _read_file

    write_image_folder(tmp_path / "data", classes=("a", "b"), per_class=1)
    project = load_project_data(image_project(tmp_path / "data", model=_model(2)))
    inputs = ModelInputs((8, 8, 1), None, None, None, None)
    jpeg = tf.io.encode_jpeg(tf.fill((8, 8, 1), tf.constant(90, tf.uint8))).numpy()
    (tmp_path / "cut.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (tmp_path / "empty.png").write_bytes(b"")
    (tmp_path / "text.png").write_text("a note")
    refusals = {}
    for name in ("cut.jpg", "empty.png", "text.png", "data"):
        with pytest.raises((InputError, DataError)) as refused:
            _read_file(tmp_path / name, inputs, project)
        refusals[name] = str(refused.value)
    assert refusals == {
        "cut.jpg": "it is cut short (JPEG)",
        "empty.png": "it is empty",
        "text.png": "it is not a JPEG, PNG, GIF or BMP image",
        "data": f"is a folder; name the files in it instead (such as {tmp_path / 'data'}/*.png)",
    }


# --- a real run ------------------------------------------------------------------------


@pytest.mark.slow
def test_a_run_names_an_image_removed_while_it_trains(tmp_path: Path) -> None:
    """One line naming the file, no traceback, and the checkpoints kept for a resume."""
    from distloop.engine.messages import RunFailed, StepMetrics
    from distloop.engine.process import EngineProcess

    images = write_image_folder(tmp_path / "pics", classes=("a", "b"), per_class=4)
    training = {"steps": 1_000_000, "seed": 1, "checkpoint_every": 5}
    project = load_project_data(image_project(images, model=_model(2), training=training))
    gone = images / "b" / "002.png"
    engine = EngineProcess(project.resolve_paths(tmp_path), tmp_path / "run")
    engine.start()
    messages: list = []
    try:
        deadline = time.monotonic() + 120
        while not engine.done:
            assert time.monotonic() < deadline, "the run did not fail"
            for message in engine.poll(0.2):
                messages.append(message)
                if isinstance(message, StepMetrics) and message.steps[-1] >= 10 and gone.exists():
                    gone.unlink()  # after the checkpoint of step 10
    finally:
        engine.close()
    failure = messages[-1]
    assert isinstance(failure, RunFailed) and failure.known, failure
    assert failure.message == (
        f"data.path: {gone} was removed during the run; put it back, then resume the run: it "
        "goes on from its last checkpoint"
    )
    assert list((tmp_path / "run" / "checkpoints").glob("ckpt-*.index"))
    # Where it stopped: the last step reported, in the message and the run's status.
    reported = [m.steps[-1] for m in messages if isinstance(m, StepMetrics)][-1]
    assert failure.last_step == reported >= 10
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["status"] == "failed" and status["last_step"] == reported


@pytest.mark.slow
def test_image_folder_run_on_two_replicas(tmp_path: Path) -> None:
    """3 classes x 12 PNGs with one cut-short file skipped, a seeded evaluation split,
    augmentation on, mirrored over 2 CPU replicas: the loss falls, classes.json and the
    skip warning name what they should."""
    folder = write_image_folder(tmp_path / "shapes")
    bad = folder / "square" / "zz-broken.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n truncated")
    data = {
        "on_bad_file": "skip",
        "shuffle_buffer": 64,
        "flip": True,
        "rotation": 10.0,
        "crop": 0.1,
    }
    project = load_project_data(
        image_project(folder, data=data, evaluation={"every": 12, "split": 0.25})
    )
    result = run_engine(project, tmp_path / "run")
    assert isinstance(result["terminal"], RunFinished), result["terminal"]
    assert result["started"].num_replicas == 2
    (warning,) = [w for w in result["started"].warnings if "skipped" in w]
    assert warning == (
        f"data.path: skipped 1 unreadable image(s) (data.on_bad_file is skip): {bad} is cut "
        "short (PNG)"
    )
    losses = result["losses"]
    assert len(losses) == 24
    assert losses[-4:].mean() < 0.5 * losses[:4].mean()
    assert json.loads((tmp_path / "run" / "classes.json").read_text()) == [
        "circle",
        "square",
        "triangle",
    ]
    assert [e.step for e in result["evals"]] == [12, 24]


# --- text folders ----------------------------------------------------------------------


def write_text_folder(root: Path) -> Path:
    """Two classes of four texts; 'zebra' is written only in the file a split holds out."""
    texts = {
        "en": ["the cat sat", "the dog ran", "a cat and a dog", "the end"],
        "fr": ["le chat", "le chien court", "un chat et un chien", "la fin"],
    }
    for name, lines in texts.items():
        (root / name).mkdir(parents=True)
        for index, line in enumerate(lines):
            (root / name / f"{index}.txt").write_text(line)
    return root


def text_project(path: Path, **changes: object) -> dict:
    project = image_project(path, **changes)
    project["model"] = {"input_shape": [5], "layers": [{"kind": "dense", "units": 2}]}
    project["data"] = {
        "source": "text_folder",
        "path": str(path),
        "sequence_length": 5,
        "vocabulary_size": 20,
        "global_batch_size": 4,
    }
    return project


def test_text_folder_checks_shape_vocabulary_and_folder(tmp_path: Path) -> None:
    write_text_folder(tmp_path / "texts")
    project = text_project(tmp_path / "texts")
    assert problems_of(project) == []
    project["model"]["input_shape"] = [6]
    assert problems_of(project) == [
        "model.input_shape: text data gives 5 word numbers per example (data.sequence_length); "
        "the input_shape must be [5], not [6]"
    ]
    (tmp_path / "texts" / "de").mkdir()
    (tmp_path / "texts" / "de" / "notes.md").write_text("nicht gelesen")
    (found,) = problems_of(text_project(tmp_path / "texts"))
    assert found == (
        f"data.path: {tmp_path / 'texts'}: class folder(s) de hold no text files (.txt); other "
        "files such as de/notes.md are not read; add text files or remove the folder(s)"
    )


def test_text_vocabulary_is_learned_from_the_training_split_only(tmp_path: Path) -> None:
    from distloop.engine.tf.data import build_eval_data, build_training_data, load_text_for_model

    folder = write_text_folder(tmp_path / "texts")
    project = load_project_data(text_project(folder, evaluation={"every": 1, "split": 0.25}))
    training = build_training_data(project)
    assert training.classes == ("en", "fr") and training.examples == 6
    held, count = build_eval_data(project)
    assert count == 2
    (held_words, held_labels) = next(iter(held))
    held_texts = sorted({int(label) for label in held_labels.numpy()})
    assert held_texts == [0, 1]  # the seeded split holds out one text per class here
    train_words = np.concatenate([x.numpy() for x, _ in training.dataset.take(2)])  # one epoch
    assert train_words.shape == (6, 5) and train_words.dtype == np.float32
    # A word seen only in held-out texts is unknown (1) to the vocabulary.
    trained_vocabulary = set(train_words.ravel().tolist())
    held_only = {w for w in held_words.numpy().ravel().tolist() if w not in trained_vocabulary}
    assert held_only <= {1.0}
    for words in held_words.numpy():
        assert any(
            np.array_equal(words, load_text_for_model(path.read_text(), project, None))
            for path in folder.glob("*/*.txt")
        )


# --- export as script ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("cache", [False, True], ids=["names", "cached"])
def test_exported_image_folder_script_gives_the_engines_loss_trace(
    tmp_path: Path, cache: bool
) -> None:
    """The script shuffles as the engine does: every name every epoch, or, cached, the
    names once and then the cached examples through the buffer."""
    from distloop.engine.script_export import render_script

    folder = write_image_folder(tmp_path / "shapes", per_class=6)
    data = {"shuffle_buffer": 8, "global_batch_size": 6, "cache": cache}
    project = load_project_data(
        image_project(folder, data=data, strategy={"kind": "mirrored"}, training={"epochs": 2})
    )
    script = tmp_path / "exported.py"
    script.write_text(render_script(project))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=240, check=True
    )
    pairs = [line.split() for line in result.stdout.splitlines() if line.startswith("step=")]
    losses = np.array([float(loss.removeprefix("loss=")) for _, loss in pairs], np.float32)
    assert "classes: circle, square, triangle" in result.stdout
    engine = run_engine(project, None)
    assert len(losses) == len(engine["steps"]) == 6
    np.testing.assert_allclose(losses, engine["losses"], rtol=1e-5)


def test_a_text_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    from distloop.engine.data_sources import DataError
    from distloop.engine.tf.data import build_training_data

    folder = write_text_folder(tmp_path / "texts")
    latin = folder / "fr" / "2.txt"
    latin.write_bytes("un caf\u00e9".encode("latin-1"))
    with pytest.raises(DataError) as refused:
        build_training_data(load_project_data(text_project(folder)))
    assert str(refused.value) == (
        f"data.path: {latin} is not UTF-8 text (byte 6 is 0xe9); save it as UTF-8"
    )
