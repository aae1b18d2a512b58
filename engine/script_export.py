"""Export as script: a readable, standalone TensorFlow program that reproduces a run.

The script is what a user would write by hand from the reference guide, with the
project's settings filled in: the strategy, TF_CONFIG handling, the model, the
data, the ``train_step`` / ``distributed_train_step`` pair and the loop, printing
``step=<n> loss=<value>`` like ``distloop run``. It needs TensorFlow and numpy,
not Distloop: synthetic data generators are copied in from ``engine.synthetic``
(their source, so the examples are the same ones), and every seed is the one
the engine uses, so the script's loss trace equals the engine's.

Fused steps (``steps_per_execution``) are left out on purpose: they change speed,
not the trace, and the one-call-per-step loop is the guide's form. Evaluation on a
separate source is left out too (it does not change training); projects with
custom step code or an evaluation split are refused with the reason.
"""

from __future__ import annotations

import inspect
import json
import textwrap

from . import __version__
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
)
from .datasets import IMAGE_EXTENSIONS, list_class_files
from .model_shapes import BACKBONES
from .synthetic import make_classification, make_regression
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
    if isinstance(project.data, TextFolderData):
        raise ExportError(
            "text_folder data needs its TextVectorization vocabulary, learned by the run; "
            "export is for the other data sources"
        )
    if isinstance(project.data, TFRecordData):
        raise ExportError(
            "tfrecord data is parsed by Distloop's own pipeline; export is for the other "
            "data sources"
        )
    if isinstance(project.data, ImageFolderData) and project.data.augments:
        raise ExportError(
            "image augmentation (data.flip, data.rotation, data.crop) is Distloop's own "
            "seeded pipeline; turn it off to export the run as a script"
        )
    if project.evaluation is not None and project.evaluation.split is not None:
        raise ExportError(
            "evaluation.split holds training examples out, which the script does not do; "
            "use a separate evaluation source (the script then trains the same way)"
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
    imports = "import numpy as np\nimport tensorflow as tf"
    if isinstance(project.data, ImageFolderData):
        imports = "import os\n\n" + imports
    if project.tf_config is not None:
        imports = f"""import os

import numpy as np

# Every task of the cluster runs this script with its own TF_CONFIG. When none is
# set, the project's (task {project.tf_config.task}) is used. It must be set before
# TensorFlow starts.
os.environ.setdefault("{TF_CONFIG_VAR}", {project.tf_config.to_env()!r})

import tensorflow as tf  # noqa: E402"""
    return f'''#!/usr/bin/env python3
"""{project.name}: a custom training loop with tf.distribute.

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
    data, model, loss, training = project.data, project.model, project.loss, project.training
    lines = ["# --- data --------------------------------------------------------------------"]
    lines.append(f"GLOBAL_BATCH_SIZE = {data.global_batch_size}")
    decode = isinstance(data, ImageFolderData)
    if isinstance(data, ImageFolderData):
        lines += _image_folder_lines(data, project)
    elif isinstance(data, ConstantData):
        label_type = "np.int32" if loss.kind == "sparse_categorical_crossentropy" else "np.float32"
        lines += [
            f"features = np.asarray({data.features!r}, np.float32).reshape("
            f"{list(model.input_shape)!r})",
            f"labels = np.asarray({data.labels!r}, {label_type})",
            f"dataset = tf.data.Dataset.from_tensors((features, labels)).repeat({data.examples})",
        ]
    else:
        if isinstance(data, SyntheticClassification):
            lines += [
                "",
                textwrap.dedent(inspect.getsource(make_classification)),
                f"x, y = make_classification({data.examples}, {list(model.input_shape)!r}, "
                f"{data.num_classes}, {data.noise!r}, {data.seed}, {loss.kind!r})",
            ]
        elif isinstance(data, SyntheticRegression):
            lines += [
                "",
                textwrap.dedent(inspect.getsource(make_regression)),
                f"x, y = make_regression({data.examples}, {list(model.input_shape)!r}, "
                f"{model.output_units}, {data.noise!r}, {data.seed})",
            ]
        elif isinstance(data, NumpyData):
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
            "dataset = tf.data.Dataset.from_tensor_slices((x, y))",
        ]
    if data.shuffle_buffer:
        lines.append(
            f"dataset = dataset.shuffle({data.shuffle_buffer}, seed={training.seed}, "
            "reshuffle_each_iteration=True)"
        )
    if decode:  # after the shuffle: the shuffle buffer holds file names, not images
        lines.append("dataset = dataset.map(load_example, num_parallel_calls=tf.data.AUTOTUNE)")
    lines.append(
        f"dataset = dataset.batch(GLOBAL_BATCH_SIZE, drop_remainder={data.drop_remainder!r})"
    )
    lines.append(
        "dataset = dataset.repeat()"
        if training.steps is not None
        else f"dataset = dataset.repeat({training.epochs})  # {training.epochs} epoch(s)"
    )
    lines += [
        "options = tf.data.Options()",
        "options.deterministic = True",
        "dataset = dataset.with_options(options).prefetch(tf.data.AUTOTUNE)",
        "dist_dataset = strategy.experimental_distribute_dataset(dataset)",
    ]
    return "\n".join(lines)


def _image_folder_lines(data: ImageFolderData, project: Project) -> list[str]:
    """The folder's files listed as the engine lists them, decoded as the engine decodes."""
    height, width = project.model.input_shape[:2]
    channels = image_channels(data, project.model)
    loss, units = project.loss.kind, project.model.output_units
    if loss == "sparse_categorical_crossentropy":
        label = "label"
    elif loss == "binary_crossentropy":
        label = "tf.reshape(tf.cast(label, tf.float32), (1,))"
    else:
        label = f"tf.one_hot(label, {units}, dtype=tf.float32)"
    skip = (
        "# Distloop skips unreadable images (data.on_bad_file: skip); here they fail the run."
        if data.on_bad_file == "skip"
        else ""
    )
    return [
        "",
        textwrap.dedent(inspect.getsource(list_class_files)),
        f"classes, files, labels, _ = list_class_files({data.path!r}, {IMAGE_EXTENSIONS!r})",
        "print('classes:', ', '.join(classes))",
        skip,
        "",
        "",
        "def load_example(path, label):",
        f'    """Decoded, resized to {height}x{width}, {channels} channel(s), scaled to [0, 1]."""',
        f"    image = tf.io.decode_image(tf.io.read_file(path), channels={channels}, "
        "expand_animations=False)",
        f"    image = tf.image.resize(image, ({height}, {width})) / 255.0",
        f"    image.set_shape(({height}, {width}, {channels}))",
        f"    return image, {label}",
        "",
        "",
        "dataset = tf.data.Dataset.from_tensor_slices((files, np.asarray(labels, np.int32)))",
    ]


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


@tf.function(reduce_retracing=True)
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
