"""TFRecord files of ``tf.train.Example`` records, parsed by the project's feature spec
(``engine/tf/data_sources/tfrecord.py``); their record lengths are walked before
TensorFlow reads a record (``engine.tfrecord_files``)."""

from __future__ import annotations

import glob
import os

import numpy as np

from ..config import Project, TFRecordData
from ..fileio import file_kind_problem
from ..problems import Problem
from ..tfrecord_files import first_labels, oversized_record_problem
from .base import DataSource, LabelSample, ScriptData
from .script_lines import definitions, engine_tf_source, held_out_lines, split_of


class TFRecordSource(DataSource[TFRecordData]):
    file_types = "TFRecord files (*.tfrecord *.tfrecords *.tfrec);;All files (*)"

    def form_start(self) -> dict[str, object]:
        return {
            "path": "",
            "features": [{"name": "x", "dtype": "float32", "shape": [1]}, {"name": "y"}],
            "label": "y",
        }

    def file_problems(self, data: TFRecordData) -> list[str]:
        """That the pattern matches a file, and the first match that is no regular file."""
        files = sorted(glob.glob(os.path.expanduser(data.path)))
        if not files:
            return [f"no file matches {data.path}"]
        found = [(file, file_kind_problem(file)) for file in files]
        return [f"{file} {problem}" for file, problem in found if problem is not None][:1]

    def label_sample(self, data: TFRecordData, limit: int, max_bytes: int) -> LabelSample | None:
        files = sorted(glob.glob(os.path.expanduser(data.path)))
        found = first_labels(files, data.compression, data.label, limit, max_bytes)
        if found is None:
            return None
        labels, whole = found
        return LabelSample(np.array(labels, dtype=np.float64), whole)

    def record_problems(self, data: TFRecordData, where: str) -> list[Problem]:
        for file in sorted(glob.glob(os.path.expanduser(data.path))):
            found = oversized_record_problem(file, data.compression, where)
            if found is not None:
                return [Problem((*where.split("."), "path"), found)]
        return []

    def shape_problems(
        self, data: TFRecordData, project: Project, loc: tuple[str, ...]
    ) -> list[Problem]:
        """The spec names the label once, and its other features fill the model's input."""
        model, loss = project.model, project.loss
        names = [spec.name for spec in data.features]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            return [Problem((*loc, "features"), f"names {', '.join(repeated)} more than once")]
        if data.label not in names:
            return [
                Problem(
                    (*loc, "label"),
                    f"{data.label!r} is not one of the features ({', '.join(names)}); name the "
                    "feature that holds the label",
                )
            ]
        problems = []
        label = data.features[names.index(data.label)]
        inputs = sum(spec.size for spec in data.features if spec.name != data.label)
        if inputs != model.input_size:
            problems.append(
                Problem(
                    (*loc, "features"),
                    f"the features other than the label hold {inputs} value(s) per example, but "
                    f"model.input_shape {model.input_shape} takes {model.input_size}",
                )
            )
        if loss.kind == "sparse_categorical_crossentropy" and (label.dtype, label.size) != (
            "int64",
            1,
        ):
            problems.append(
                Problem(
                    (*loc, "features", names.index(data.label)),
                    "sparse_categorical_crossentropy takes one class number per example: give the "
                    "label feature dtype int64 and shape []",
                )
            )
        elif loss.kind != "sparse_categorical_crossentropy" and label.size != model.output_units:
            problems.append(
                Problem(
                    (*loc, "features", names.index(data.label)),
                    f"the label feature holds {label.size} value(s) per example but the model "
                    f"predicts {model.output_units} with {loss.kind}",
                )
            )
        return problems

    def script(self, data: TFRecordData, project: Project) -> ScriptData:
        """The records, parsed by the project's feature spec as the engine parses them."""
        spec = "".join(
            f"    {feature.name!r}: tf.io.FixedLenFeature({feature.shape!r}, tf.{feature.dtype}),\n"
            for feature in data.features
        )
        inputs = [feature.name for feature in data.features if feature.name != data.label]
        sparse = project.loss.kind == "sparse_categorical_crossentropy"
        compression = "" if data.compression == "none" else data.compression
        lines = [
            *definitions(engine_tf_source("tfrecord", "parse_record")),
            f"FEATURES = {{\n{spec}}}",
            f"files = sorted(tf.io.gfile.glob({data.path!r}))",
            f"records = tf.data.TFRecordDataset(files, compression_type={compression!r})",
            "dataset = records.map(",
            f"    lambda record: parse_record(record, FEATURES, {inputs!r}, {data.label!r}, "
            f"{list(project.model.input_shape)!r}, {sparse!r}),",
            "    num_parallel_calls=tf.data.AUTOTUNE,",
            ")",
        ]
        split = split_of(project)
        if split is not None:
            lines += [
                "# One counting pass: the split chooses among all the records.",
                "examples = int(dataset.reduce(tf.constant(0, tf.int64), "
                "lambda count, _: count + 1))",
                *held_out_lines(split, "examples", project.training.seed),
                "keep = tf.constant(~held)",
                "dataset = (",
                "    dataset.enumerate()",
                "    .filter(lambda number, _: tf.gather(keep, number))",
                "    .map(lambda _, example: example)",
                ")",
            ]
        return ScriptData(lines)


SOURCE = TFRecordSource()
