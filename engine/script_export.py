"""Export as script: a readable, standalone TensorFlow program that reproduces a run.

The script is what a user would write by hand from the reference guide, with the
project's settings filled in: the strategy, TF_CONFIG handling, the model, the
data, the ``train_step`` / ``distributed_train_step`` pair and the loop, printing
``step=<n> loss=<value>`` like ``distloop run``. It needs TensorFlow and numpy,
not Distloop, and every seed is the one the engine uses, so the script's loss trace
equals the engine's.

Every data source is exported: each writes its own lines (its
:meth:`~engine.data_sources.base.DataSource.script`), and this module the batching,
shuffling and repeating they share. Where the engine's data code is what makes the trace
equal (synthetic generators, folder listing, the evaluation split's choice, image
decoding and augmentation, text vectorization, TFRecord parsing), the script gets that
code's source, not a second version (``engine.data_sources.script_lines``).
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

import json
import re

from . import __version__
from .code_text import inert
from .config import (
    AdagradConfig,
    AdamConfig,
    BatchNormalizationLayer,
    Conv1DLayer,
    Conv2DLayer,
    DataConfig,
    DenseLayer,
    DropoutLayer,
    EmbeddingLayer,
    GRULayer,
    Initializer,
    Layer,
    LayerNormalizationLayer,
    LSTMLayer,
    Project,
    Regularizer,
    RescalingLayer,
    RMSpropConfig,
    SGDConfig,
)
from .data_sources import source_of
from .data_sources.base import ScriptData
from .model_shapes import BACKBONES
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
    script = source_of(project.data).script(project.data, project)
    sections = [
        _header(project, script.imports),
        _strategy(project),
        _model(project),
        _data(project, script),
        _step(project),
        _loop(project),
    ]
    return "\n\n".join(section.strip("\n") for section in sections) + "\n"


def _header(project: Project, data_imports: set[str]) -> str:
    standard = data_imports | ({"os"} if project.tf_config is not None else set())
    imports = "".join(f"import {name}\n" for name in sorted(standard))
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


def _shuffle_lines(data: DataConfig, seed: int, file_names: bool) -> list[str]:
    """The shuffle the engine makes (``engine.tf.data.build_training_data``): file names are
    shuffled whole and loaded after, once before a cache that the buffer then mixes."""
    load = "dataset = dataset.map(load_example, num_parallel_calls=tf.data.AUTOTUNE)"
    buffer = (
        f"dataset = dataset.shuffle({data.shuffle_buffer}, seed={seed}, "
        "reshuffle_each_iteration=True)"
    )
    if not file_names:
        return [buffer] if data.shuffle_buffer else []
    if not data.shuffle_buffer:
        return [load]
    if not data.cache:
        return [
            "# Every file name, every epoch: the folder lists its files class by class.",
            f"dataset = dataset.shuffle(len(files), seed={seed}, reshuffle_each_iteration=True)",
            load,
        ]
    return [
        "# Every file name once, then the loaded examples are cached and mixed every epoch.",
        f"dataset = dataset.shuffle(len(files), seed={seed}, reshuffle_each_iteration=False)",
        load + ".cache()",
        buffer,
    ]


def _data(project: Project, script: ScriptData) -> str:
    data, training = project.data, project.training
    lines = ["# --- data --------------------------------------------------------------------"]
    lines.append(f"GLOBAL_BATCH_SIZE = {data.global_batch_size}")
    lines += script.lines
    lines += _shuffle_lines(data, training.seed, script.load_after_shuffle)
    lines.append(
        f"dataset = dataset.batch(GLOBAL_BATCH_SIZE, drop_remainder={data.drop_remainder!r})"
    )
    lines.append(
        "dataset = dataset.repeat()"
        if training.steps is not None
        else f"dataset = dataset.repeat({training.epochs})  # {training.epochs} epoch(s)"
    )
    lines += script.after_repeat
    lines += [
        "options = tf.data.Options()",
        "options.deterministic = True",
        "dataset = dataset.with_options(options).prefetch(tf.data.AUTOTUNE)",
        "dist_dataset = strategy.experimental_distribute_dataset(dataset)",
    ]
    return re.sub(r"\n{4,}", "\n\n\n", "\n".join(lines))  # at most two blank lines


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
