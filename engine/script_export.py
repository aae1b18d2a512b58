"""Export as script: a readable, standalone TensorFlow program that reproduces a run.

The script is what a user would write by hand from the reference guide, with the
project's settings filled in: the strategy, TF_CONFIG handling, the model, the
data, the ``train_step`` / ``distributed_train_step`` pair and the loop, printing
``step=<n> loss=<value>`` like ``distloop run``. It needs TensorFlow and numpy,
not Distloop, and every seed is the one the engine uses, so the script's loss trace
equals the engine's.

Every data source is exported. Where the engine's data code is what makes the trace
equal (synthetic generators, folder listing, the evaluation split's choice, image
decoding and augmentation, text vectorization, TFRecord parsing), the script gets that
code's source, not a second version written here: from TensorFlow-free modules with
``inspect``, from ``engine/tf`` modules by reading the file (:func:`_engine_tf_source`).
CSV and .npz files the engine streams (``data.stream``) are loaded whole: the same
examples in the same order. An evaluation split holds out the examples the engine
holds out; the script does not evaluate them (evaluation does not change training),
nor does it evaluate a separate source.

Fused steps (``steps_per_execution``) are left out on purpose: they change speed,
not the trace, and the one-call-per-step loop is the guide's form. Image files the
engine skips as unreadable (``on_bad_file: skip``) are not checked by the script: one
that cannot be decoded fails it, as its comment says. Projects with custom step code
or a parameter-server strategy are refused with the reason.
"""

from __future__ import annotations

import ast
import inspect
import json
import re
from collections.abc import Callable
from pathlib import Path

from . import __version__
from .code_text import inert
from .config import (
    AdagradConfig,
    AdamConfig,
    BatchNormalizationLayer,
    ConstantData,
    Conv1DLayer,
    Conv2DLayer,
    CsvData,
    DenseLayer,
    DropoutLayer,
    EmbeddingLayer,
    GRULayer,
    ImageFolderData,
    Initializer,
    Layer,
    LayerNormalizationLayer,
    LSTMLayer,
    NumpyData,
    Project,
    Regularizer,
    RescalingLayer,
    RMSpropConfig,
    SGDConfig,
    SyntheticClassification,
    SyntheticRegression,
    TextFolderData,
    TFRecordData,
    image_channels,
    split_counts,
)
from .datasets import IMAGE_EXTENSIONS, TEXT_EXTENSIONS, list_class_files
from .model_shapes import BACKBONES
from .synthetic import held_out, make_classification, make_regression
from .tf_config import TF_CONFIG_VAR


class ExportError(ValueError):
    """The project uses something a standalone script cannot reproduce."""


def render_script(project: Project) -> str:
    """The whole script as text; raises ExportError for what cannot be exported."""
    if project.strategy.kind == "parameter_server":
        raise ExportError(
            "parameter_server runs need a coordinator and server tasks; export the cluster "
            "with `distloop export --format shell` instead of a single script"
        )
    if project.custom_code is not None:
        raise ExportError(
            "the project runs custom step code from "
            f"{project.custom_code.path}; a standalone script cannot contain it"
        )
    sections = [
        _header(project),
        _strategy(project),
        _model(project),
        _data(project),
        _step(project),
        _loop(project),
    ]
    return "\n\n".join(section.strip("\n") for section in sections) + "\n"


def _header(project: Project) -> str:
    data = project.data
    standard = {
        "math": isinstance(data, ImageFolderData) and data.augments,
        "os": isinstance(data, ImageFolderData | TextFolderData) or project.tf_config is not None,
    }
    imports = "".join(f"import {name}\n" for name, used in standard.items() if used)
    imports += "\n" if imports else ""
    imports += "import numpy as np\nimport tensorflow as tf"
    if project.tf_config is not None:
        imports = imports.replace(
            "import tensorflow as tf",
            f"""
# Every task of the cluster runs this script with its own TF_CONFIG. When none is
# set, the project's (task {project.tf_config.task}) is used. It must be set before
# TensorFlow starts.
os.environ.setdefault("{TF_CONFIG_VAR}", {project.tf_config.to_env()!r})

import tensorflow as tf  # noqa: E402""",
        )
    return f'''#!/usr/bin/env python3
"""{inert(project.name)}: a custom training loop with tf.distribute.

Exported by Distloop {__version__}. Standalone: needs TensorFlow and numpy only.
Prints one line per step, `step=<n> loss=<value>`, like `distloop run`.
"""

{imports}
'''


def _strategy(project: Project) -> str:
    config = project.strategy
    lines = [
        "# --- strategy ---------------------------------------------------------------",
        "for gpu in tf.config.list_physical_devices('GPU'):",
        f"    tf.config.experimental.set_memory_growth(gpu, {project.training.gpu_memory_growth})",
    ]
    if config.cpu_replicas > 1:
        lines += [
            f"# Split the CPU into {config.cpu_replicas} logical devices: one replica each.",
            "cpu = tf.config.list_physical_devices('CPU')[0]",
            "tf.config.set_logical_device_configuration(",
            f"    cpu, [tf.config.LogicalDeviceConfiguration()] * {config.cpu_replicas}",
            ")",
        ]
    lines += [
        f"tf.keras.utils.set_random_seed({project.training.seed})",
    ]
    if project.training.deterministic:
        lines.append("tf.config.experimental.enable_op_determinism()")
    kind = config.kind
    if kind == "default":
        lines.append("strategy = tf.distribute.get_strategy()")
    elif kind == "one_device":
        device = config.devices[0] if config.devices else None
        lines.append(
            f"strategy = tf.distribute.OneDeviceStrategy({device!r})"
            if device
            else "gpus = tf.config.list_logical_devices('GPU')\n"
            "strategy = tf.distribute.OneDeviceStrategy(gpus[0].name if gpus else '/cpu:0')"
        )
    elif kind == "mirrored":
        ops = {
            "nccl": "tf.distribute.NcclAllReduce()",
            "hierarchical_copy": "tf.distribute.HierarchicalCopyAllReduce()",
            "reduce_to_one_device": "tf.distribute.ReductionToOneDevice()",
        }.get(config.cross_device_ops, "None")
        if config.cpu_replicas > 1:
            devices = "[d.name for d in tf.config.list_logical_devices('CPU')]"
        else:
            devices = repr(config.devices)
        lines += [
            "strategy = tf.distribute.MirroredStrategy(",
            f"    devices={devices},",
            f"    cross_device_ops={ops},",
            ")",
        ]
    elif kind == "multi_worker_mirrored":
        implementation = config.communication.upper()
        lines += [
            "options = tf.distribute.experimental.CommunicationOptions(",
            f"    implementation=tf.distribute.experimental.CommunicationImplementation."
            f"{implementation},",
            f"    timeout_seconds={config.communication_timeout_s!r},",
            ")",
            "strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)",
        ]
    elif kind == "tpu":
        lines += [
            f"resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu={config.tpu!r})",
            "tf.config.experimental_connect_to_cluster(resolver)",
            "tf.tpu.experimental.initialize_tpu_system(resolver)",
            "strategy = tf.distribute.TPUStrategy(resolver)",
        ]
    lines.append("print('replicas in sync:', strategy.num_replicas_in_sync)")
    return "\n".join(lines)


def _initializer(config: Initializer, seed: int) -> str:
    init = "tf.keras.initializers"
    return {
        "glorot_uniform": f"{init}.GlorotUniform(seed={seed})",
        "he_normal": f"{init}.HeNormal(seed={seed})",
        "random_normal": f"{init}.RandomNormal(stddev={config.stddev or 0.05!r}, seed={seed})",
        "zeros": f"{init}.Zeros()",
        "ones": f"{init}.Ones()",
        "constant": f"{init}.Constant({config.value!r})",
    }[config.kind]


def _optimizer(project: Project) -> str:
    """The optimizer's constructor call, one argument per line inside the scope block."""
    o = project.optimizer
    if isinstance(o, SGDConfig):
        name, args = "SGD", {"momentum": o.momentum, "nesterov": o.nesterov}
    elif isinstance(o, AdamConfig):
        name = "Adam"
        args = {"beta_1": o.beta_1, "beta_2": o.beta_2, "epsilon": o.epsilon, "amsgrad": o.amsgrad}
    elif isinstance(o, RMSpropConfig):
        name = "RMSprop"
        args = {"rho": o.rho, "momentum": o.momentum, "epsilon": o.epsilon, "centered": o.centered}
    elif isinstance(o, AdagradConfig):
        name = "Adagrad"
        args = {"initial_accumulator_value": o.initial_accumulator_value, "epsilon": o.epsilon}
    else:
        raise ExportError(f"unknown optimizer {o!r}")
    lines = [f"learning_rate={o.learning_rate!r}"] + [f"{k}={v!r}" for k, v in args.items()]
    body = "".join(f"        {line},\n" for line in lines)
    return f"tf.keras.optimizers.{name}(\n{body}    )"


def _regularizer(config: Regularizer | None) -> str:
    if config is None or not (config.l1 or config.l2):
        return "None"
    return f"tf.keras.regularizers.L1L2(l1={config.l1!r}, l2={config.l2!r})"


def _arguments(*positional: object, **named: object) -> str:
    """Constructor arguments, one a line when there are several (as a person writes them)."""
    parts = [str(p) for p in positional] + [f"{k}={v}" for k, v in named.items()]
    if len(parts) <= 2:
        return ", ".join(parts)
    return "\n" + "".join(f"            {part},\n" for part in parts) + "        "


def _layer(layer: Layer, seed: int) -> str:
    """One project layer as the Keras constructor the engine calls (engine.tf.model)."""
    k = "tf.keras.layers"
    if isinstance(layer, DenseLayer):
        activation = None if layer.activation == "linear" else layer.activation
        return (
            f"{k}.Dense(\n"
            f"            {layer.units},\n"
            f"            activation={activation!r},\n"
            f"            use_bias={layer.use_bias!r},\n"
            f"            kernel_initializer={_initializer(layer.kernel_initializer, seed)},\n"
            f"            kernel_regularizer={_regularizer(layer.kernel_regularizer)},\n"
            f"        )"
        )
    if isinstance(layer, DropoutLayer):
        return f"{k}.Dropout({layer.rate!r}, seed={seed})"
    if isinstance(layer, Conv1DLayer | Conv2DLayer):
        name = "Conv1D" if isinstance(layer, Conv1DLayer) else "Conv2D"
        activation = None if layer.activation == "linear" else layer.activation
        return (
            f"{k}.{name}("
            + _arguments(
                layer.filters,
                layer.kernel_size,
                strides=layer.strides,
                padding=repr(layer.padding),
                activation=repr(activation),
                use_bias=layer.use_bias,
                kernel_initializer=_initializer(layer.kernel_initializer, seed),
                kernel_regularizer=_regularizer(layer.kernel_regularizer),
            )
            + ")"
        )
    pooling = {
        "max_pooling1d": "MaxPooling1D",
        "max_pooling2d": "MaxPooling2D",
        "average_pooling1d": "AveragePooling1D",
        "average_pooling2d": "AveragePooling2D",
    }.get(layer.kind)
    if pooling is not None:
        return (
            f"{k}.{pooling}({layer.pool_size}, strides={layer.strides}, padding={layer.padding!r})"
        )
    global_pooling = {
        "global_average_pooling1d": "GlobalAveragePooling1D",
        "global_average_pooling2d": "GlobalAveragePooling2D",
        "global_max_pooling1d": "GlobalMaxPooling1D",
        "global_max_pooling2d": "GlobalMaxPooling2D",
        "flatten": "Flatten",
    }.get(layer.kind)
    if global_pooling is not None:
        return f"{k}.{global_pooling}()"
    if isinstance(layer, BatchNormalizationLayer):
        return (
            f"{k}.BatchNormalization(momentum={layer.momentum!r}, epsilon={layer.epsilon!r}, "
            f"synchronized={layer.synchronized!r})"
        )
    if isinstance(layer, LayerNormalizationLayer):
        return f"{k}.LayerNormalization(epsilon={layer.epsilon!r})"
    if isinstance(layer, EmbeddingLayer):
        uniform = f"tf.keras.initializers.RandomUniform(-0.05, 0.05, seed={seed})"
        return (
            f"{k}.Embedding("
            + _arguments(
                layer.input_dim,
                layer.output_dim,
                embeddings_initializer=uniform,
            )
            + ")"
        )
    if isinstance(layer, LSTMLayer | GRULayer):
        name = "LSTM" if isinstance(layer, LSTMLayer) else "GRU"
        return (
            f"{k}.{name}("
            + _arguments(
                layer.units,
                return_sequences=layer.return_sequences,
                kernel_initializer=_initializer(layer.kernel_initializer, seed),
                recurrent_initializer=f"tf.keras.initializers.Orthogonal(seed={seed})",
            )
            + ")"
        )
    if isinstance(layer, RescalingLayer):
        return f"{k}.Rescaling({layer.scale!r}, offset={layer.offset!r})"
    raise ExportError(f"no script form for layer {layer.kind!r}")


def _model(project: Project) -> str:
    seed, model = project.training.seed, project.model
    layers = [f"tf.keras.Input({tuple(model.input_shape)!r})"]
    before = ""
    if model.kind == "keras_file":
        layers.append(f"tf.keras.models.load_model({model.path!r}, compile=False)")
    else:
        if model.backbone is not None:
            application = BACKBONES[model.backbone].application
            shape = tuple(model.input_shape)
            before = (
                f"    backbone = tf.keras.applications.{application}(\n"
                f"        include_top=False, weights=None, input_shape={shape!r}\n"
                "    )\n"
            )
            if model.weights is not None:
                before += f"    backbone.load_weights({model.weights!r})\n"
            layers += ["backbone", "tf.keras.layers.GlobalAveragePooling2D()"]
        flatten_before = model.shapes().flatten_before
        for i, layer in enumerate(model.layers):
            if i == flatten_before:
                layers.append("tf.keras.layers.Flatten()")
            layers.append(_layer(layer, seed * 1000 + i))
    mixed = project.training.mixed_precision
    if mixed != "none":
        layers.append("tf.keras.layers.Activation('linear', dtype='float32')")
    loss = project.loss
    loss_class = "".join(part.capitalize() for part in loss.kind.split("_"))
    loss_args = ["reduction=None"]
    if loss.is_classification:
        loss_args.insert(0, f"from_logits={loss.from_logits!r}")
    if loss.kind == "huber":
        loss_args.insert(0, f"delta={loss.delta or 1.0!r}")
    layer_text = "\n".join(f"        {layer}," for layer in layers)
    optimizer = _optimizer(project)
    if mixed == "mixed_float16":
        optimizer += (
            "\n    # float16: the step scales the loss, apply_gradients unscales the gradients."
            "\n    optimizer = tf.keras.optimizers.LossScaleOptimizer(optimizer)"
        )
    policy = (
        "# Layers compute in 16 bits, weights stay float32; the last layer casts to float32\n"
        "# so the loss is computed in float32.\n"
        f"tf.keras.mixed_precision.set_global_policy({mixed!r})\n"
        if mixed != "none"
        else ""
    )
    return f"""# --- model and optimizer, created inside the strategy scope ---------------------
# Built eagerly (an Input, optimizer.build): with 2+ replicas Keras 3 cannot create
# variables inside the replicated step.
{policy}with strategy.scope():
{before}    model = tf.keras.Sequential([
{layer_text}
    ])
    optimizer = {optimizer}
    optimizer.build(model.trainable_variables)

# Per-example losses: compute_average_loss does the reducing.
loss_object = tf.keras.losses.{loss_class}({", ".join(loss_args)})"""


def _data(project: Project) -> str:
    data, training = project.data, project.training
    lines = ["# --- data --------------------------------------------------------------------"]
    lines.append(f"GLOBAL_BATCH_SIZE = {data.global_batch_size}")
    decode = isinstance(data, ImageFolderData | TextFolderData)
    if isinstance(data, ImageFolderData):
        lines += _image_folder_lines(data, project)
    elif isinstance(data, TextFolderData):
        lines += _text_folder_lines(data, project)
    elif isinstance(data, TFRecordData):
        lines += _tfrecord_lines(data, project)
    elif isinstance(data, ConstantData):
        lines += _constant_lines(data, project)
    else:
        lines += _array_lines(project)
    if data.shuffle_buffer:
        lines.append(
            f"dataset = dataset.shuffle({data.shuffle_buffer}, seed={training.seed}, "
            "reshuffle_each_iteration=True)"
        )
    if decode:  # after the shuffle: the shuffle buffer holds file names, not examples
        lines.append("dataset = dataset.map(load_example, num_parallel_calls=tf.data.AUTOTUNE)")
    lines.append(
        f"dataset = dataset.batch(GLOBAL_BATCH_SIZE, drop_remainder={data.drop_remainder!r})"
    )
    lines.append(
        "dataset = dataset.repeat()"
        if training.steps is not None
        else f"dataset = dataset.repeat({training.epochs})  # {training.epochs} epoch(s)"
    )
    if isinstance(data, ImageFolderData) and data.augments:
        lines += _augmentation_lines(data, training.seed)
    lines += [
        "options = tf.data.Options()",
        "options.deterministic = True",
        "dataset = dataset.with_options(options).prefetch(tf.data.AUTOTUNE)",
        "dist_dataset = strategy.experimental_distribute_dataset(dataset)",
    ]
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(lines))  # at most two blank lines


def _engine_tf_source(module: str, *names: str) -> str:
    """The source of functions and constants of ``engine/tf/<module>.py``, read from the file.

    Those modules import TensorFlow, and this one must not (the window imports it), so
    ``inspect`` cannot reach them; a copy written out here would be a second definition
    that drifts from what the engine runs. The file is read instead, and ``ast`` finds
    each definition (without its decorators: caching is the engine's business).
    """
    text = (Path(__file__).with_name("tf") / f"{module}.py").read_text(encoding="utf-8")
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


def _source(*functions: Callable[..., object]) -> list[str]:
    """Functions of TensorFlow-free engine modules, as the script's lines."""
    return _definitions("\n\n\n".join(inspect.getsource(f).strip() for f in functions))


def _definitions(text: str) -> list[str]:
    """Top-level definitions as lines of the script, with two blank lines around them."""
    return ["", "", text, "", ""]


def _split_of(project: Project) -> float | None:
    return project.evaluation.split if project.evaluation is not None else None


def _held_out_lines(split: float, count: str, seed: int) -> list[str]:
    """The held_out function and the line that picks the held-out examples of ``count``."""
    return [
        *_source(split_counts, held_out),
        "",
        f"# evaluation.split: {split:g} of the examples are held out to evaluate on (the",
        "# same ones in every run of the project); training keeps the rest, in their order.",
        f"held = held_out({count}, {split!r}, {seed})",
    ]


def _constant_lines(data: ConstantData, project: Project) -> list[str]:
    model, loss = project.model, project.loss
    label_type = "np.int32" if loss.kind == "sparse_categorical_crossentropy" else "np.float32"
    return [
        f"features = np.asarray({data.features!r}, np.float32).reshape("
        f"{list(model.input_shape)!r})",
        f"labels = np.asarray({data.labels!r}, {label_type})",
        f"dataset = tf.data.Dataset.from_tensors((features, labels)).repeat({data.examples})",
    ]


def _array_lines(project: Project) -> list[str]:
    """Synthetic examples made as the engine makes them, or a file's loaded into memory."""
    data, model, loss = project.data, project.model, project.loss
    lines: list[str] = []
    if isinstance(data, SyntheticClassification):
        lines += [
            *_source(make_classification),
            f"x, y = make_classification({data.examples}, {list(model.input_shape)!r}, "
            f"{data.num_classes}, {data.noise!r}, {data.seed}, {loss.kind!r})",
        ]
    elif isinstance(data, SyntheticRegression):
        lines += [
            *_source(make_regression),
            f"x, y = make_regression({data.examples}, {list(model.input_shape)!r}, "
            f"{model.output_units}, {data.noise!r}, {data.seed})",
        ]
    elif isinstance(data, NumpyData | CsvData) and data.stream:
        lines.append(
            "# data.stream: the project's runs read this file as batches form; loading it "
            "whole gives the same examples in the same order."
        )
    if isinstance(data, NumpyData):
        lines += [
            f"with np.load({data.path!r}) as arrays:",
            f"    x, y = arrays[{data.features_key!r}], arrays[{data.labels_key!r}]",
        ]
    elif isinstance(data, CsvData):
        lines += [
            f"with open({data.path!r}, encoding='utf-8') as handle:",
            "    header = handle.readline().strip().split(',')",
            f"table = np.loadtxt({data.path!r}, delimiter=',', skiprows=1, ndmin=2)",
            "table = table.astype(np.float32)",
            f"label_at = header.index({data.label_column!r})",
            "x = np.delete(table, label_at, axis=1)",
            "y = table[:, label_at:label_at + 1]",
        ]
    lines += [
        f"x = x.reshape(len(x), *{list(model.input_shape)!r}).astype(np.float32)",
        "y = y.astype(np.int32) if y.dtype.kind in 'iu' else y.astype(np.float32)",
    ]
    split = _split_of(project)
    if split is not None:
        lines += [*_held_out_lines(split, "len(x)", project.training.seed)]
        lines.append("x, y = x[~held], y[~held]")
    lines.append("dataset = tf.data.Dataset.from_tensor_slices((x, y))")
    return lines


def _folder_lines(
    data: ImageFolderData | TextFolderData, project: Project, extensions: tuple[str, ...]
) -> list[str]:
    """The folder's files and labels listed as the engine lists them, less a split's."""
    lines = [
        *_source(list_class_files),
        f"classes, files, labels, _ = list_class_files({data.path!r}, {extensions!r})",
        "print('classes:', ', '.join(classes))",
    ]
    if isinstance(data, ImageFolderData) and data.on_bad_file == "skip":
        lines += [
            "# data.on_bad_file is skip: the project's runs leave out images that cannot be",
            "# decoded. This script does not look for them first: a damaged image fails it.",
            "# Remove those files (a run's log names them) to train on the same images.",
        ]
    split = _split_of(project)
    if split is not None:
        lines += [
            *_held_out_lines(split, "len(files)", project.training.seed),
            "files = [file for file, out in zip(files, held) if not out]",
            "labels = [label for label, out in zip(labels, held) if not out]",
        ]
    return lines


def _label(project: Project) -> str:
    """The call that makes a class number what the loss takes (``encode_label``)."""
    return f"encode_label(label, {project.loss.kind!r}, {project.model.output_units})"


def _image_folder_lines(data: ImageFolderData, project: Project) -> list[str]:
    """The folder's images, decoded as the engine decodes them for training."""
    height, width = project.model.input_shape[:2]
    channels = image_channels(data, project.model)
    return [
        *_folder_lines(data, project, IMAGE_EXTENSIONS),
        *_definitions(_engine_tf_source("image_data", "decode_pixels", "scale", "encode_label")),
        "def load_example(path, label):",
        f'    """Decoded, resized to {height}x{width}, {channels} channel(s), scaled to [0, 1]."""',
        "    # Resizing an image that already has the model's size leaves every pixel as it is.",
        f"    image = scale(decode_pixels(tf.io.read_file(path), {height}, {width}, {channels}))",
        f"    return image, {_label(project)}",
        "",
        "",
        "dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, np.int32)))",
    ]


def _augmentation_lines(data: ImageFolderData, seed: int) -> list[str]:
    return [
        *_definitions(_engine_tf_source("image_data", "augment_images", "_rotate", "_crop")),
        "def augment(step, batch):",
        '    """Training batches only; the draw depends on the seed and the batch number."""',
        "    images, labels = batch",
        f"    images = augment_images(images, step, {seed}, flip={data.flip!r}, "
        f"rotation={data.rotation!r}, crop={data.crop!r})",
        "    return images, labels",
        "",
        "",
        "# Batches numbered from 0 across epochs: the number seeds the batch's augmentation.",
        "dataset = dataset.enumerate().map(augment, num_parallel_calls=tf.data.AUTOTUNE)",
    ]


def _text_folder_lines(data: TextFolderData, project: Project) -> list[str]:
    """The folder's texts as word numbers, with a vocabulary learned from the training files."""
    length = data.sequence_length
    return [
        *_folder_lines(data, project, TEXT_EXTENSIONS),
        *_definitions(
            _engine_tf_source("text_data", "ADAPT_BATCH", "adapt_vectorizer", "read_words")
        ),
        *_definitions(_engine_tf_source("image_data", "encode_label")),
        "# The vocabulary comes from the training files only, never from held-out ones.",
        f"vectorize = adapt_vectorizer(tuple(files), {data.vocabulary_size}, {length})",
        "",
        "",
        "def load_example(path, label):",
        f'    """The file\'s first {length} word numbers (0 pads, 1 is an unknown word)."""',
        f"    return read_words(vectorize, path, {length}), {_label(project)}",
        "",
        "",
        "dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, np.int32)))",
    ]


def _tfrecord_lines(data: TFRecordData, project: Project) -> list[str]:
    """The records, parsed by the project's feature spec as the engine parses them."""
    spec = "".join(
        f"    {feature.name!r}: tf.io.FixedLenFeature({feature.shape!r}, tf.{feature.dtype}),\n"
        for feature in data.features
    )
    inputs = [feature.name for feature in data.features if feature.name != data.label]
    sparse = project.loss.kind == "sparse_categorical_crossentropy"
    compression = "" if data.compression == "none" else data.compression
    lines = [
        *_definitions(_engine_tf_source("tfrecord_data", "parse_record")),
        f"FEATURES = {{\n{spec}}}",
        f"files = sorted(tf.io.gfile.glob({data.path!r}))",
        f"records = tf.data.TFRecordDataset(files, compression_type={compression!r})",
        "dataset = records.map(",
        f"    lambda record: parse_record(record, FEATURES, {inputs!r}, {data.label!r}, "
        f"{list(project.model.input_shape)!r}, {sparse!r}),",
        "    num_parallel_calls=tf.data.AUTOTUNE,",
        ")",
    ]
    split = _split_of(project)
    if split is not None:
        lines += [
            "# One counting pass: the split chooses among all the records.",
            "examples = int(dataset.reduce(tf.constant(0, tf.int64), lambda count, _: count + 1))",
            *_held_out_lines(split, "examples", project.training.seed),
            "keep = tf.constant(~held)",
            "dataset = (",
            "    dataset.enumerate()",
            "    .filter(lambda number, _: tf.gather(keep, number))",
            "    .map(lambda _, example: example)",
            ")",
        ]
    return lines


def _step(project: Project) -> str:
    jit = ", jit_compile=True" if project.training.jit_compile else ""
    compiled = (
        "\n\n# XLA compiles the arithmetic; apply_gradients (the cross-replica sum) stays outside."
        f"\nloss_and_gradients = tf.function(loss_and_gradients{jit})"
        if project.training.jit_compile
        else ""
    )
    float16 = project.training.mixed_precision == "mixed_float16"
    scaling = (
        "\n        # float16: scale the loss so small gradients survive; apply_gradients unscales."
        "\n        scaled_loss = optimizer.scale_loss(loss)"
        if float16
        else ""
    )
    gradient_of = "scaled_loss" if float16 else "loss"
    return f"""# --- the guide's train_step and distributed_train_step -----------------------
def loss_and_gradients(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        predictions = model(features, training=True)
        per_example_loss = loss_object(labels, predictions)
        # Divide by the GLOBAL batch size: gradients are summed across replicas.
        loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)
        if model.losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses)){scaling}
    return loss, tape.gradient({gradient_of}, model.trainable_variables){compiled}


def train_step(inputs):
    loss, gradients = loss_and_gradients(inputs)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))
    return loss


# Traced once, for the dataset's element_spec (the batch size left open): a short last
# batch needs no second trace, and the numbers do not depend on the first batch's size
# (a convolution may choose another algorithm for a known batch size).
@tf.function(input_signature=[dist_dataset.element_spec])
def distributed_train_step(dist_inputs):
    per_replica_losses = strategy.run(train_step, args=(dist_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)"""


def _loop(project: Project) -> str:
    training = project.training
    if training.steps is not None:
        body = f"""iterator = iter(dist_dataset)
for step in range(1, {training.steps} + 1):
    loss = distributed_train_step(next(iterator))
    print(f"step={{step}} loss={{loss.numpy()!s}}", flush=True)"""
    else:
        body = """for step, dist_inputs in enumerate(dist_dataset, start=1):
    loss = distributed_train_step(dist_inputs)
    print(f"step={step} loss={loss.numpy()!s}", flush=True)"""
    project_json = json.dumps(project.model_dump(mode="json"), indent=2).splitlines()
    provenance = "\n".join(f"#   {line}" for line in project_json)
    return f"""# --- the training loop ---------------------------------------------------------
{body}

# The Distloop project this script was exported from:
{provenance}"""
