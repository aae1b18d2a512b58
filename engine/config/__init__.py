"""The project file: every setting of a training run, validated by pydantic.

A project is JSON with ``"schema_version": 1`` and the top-level keys
``strategy``, ``tf_config``, ``model``, ``optimizer``, ``loss``, ``data`` and
``training``, plus the optional ``custom_code``, ``evaluation`` and ``launch``. These names
are a public contract (other tools read and write project files), so fields are
only ever added, never renamed.

The models are the single source of truth for what is valid: field rules live on
the fields, rules that join several fields live in :meth:`Project._cross_field`.
This package is the schema alone, the bottom of the engine: it imports none of the
data sources' code, so the rules that ask a source (does its data fit the model) run
above both, in ``engine.project_file``, whose ``load_project*`` the CLI and the GUI
both show the problems of unchanged.

One section a module (``tf_config`` has its own, ``engine.tf_config``); import
from this package, which names what the rest of Distloop uses:

``_strict``      the strict rules every value follows; limits several sections share
``strategy``     ``strategy``: the ``tf.distribute`` strategy and its devices
``model``        ``model``: layers, initializers, regularizers, backbone, ``.keras`` file
``optimizer``    ``optimizer``: one model per Keras optimizer
``loss``         ``loss``: the per-example loss
``data``         ``data`` (and an evaluation source): one model per source
``training``     ``training``, ``custom_code`` and ``evaluation``
``launch``       ``launch``: how ``distloop launch`` reaches each host over SSH
``project``      :class:`Project`, which holds them all, and :func:`parse_project`
``cross_field``  the rules that join sections from their settings (strategies agree)
"""

from ._strict import MAX_SEED
from .data import (
    DATA_MODELS,
    DATA_SOURCES,
    ConstantData,
    CsvData,
    DataConfig,
    ImageFolderData,
    NumpyData,
    SyntheticClassification,
    SyntheticRegression,
    TextFolderData,
    TFRecordData,
)
from .launch import LaunchConfig, SshHost
from .loss import LossConfig
from .model import (
    LAYER_KINDS,
    LAYER_TYPES,
    MAX_DIMENSION,
    MODEL_KINDS,
    BatchNormalizationLayer,
    Conv1DLayer,
    Conv2DLayer,
    DenseLayer,
    DropoutLayer,
    EmbeddingLayer,
    FlattenLayer,
    GRULayer,
    Initializer,
    Layer,
    LayerNormalizationLayer,
    LSTMLayer,
    ModelConfig,
    Regularizer,
    RescalingLayer,
)
from .optimizer import (
    OPTIMIZER_KINDS,
    AdagradConfig,
    AdamConfig,
    OptimizerConfig,
    RMSpropConfig,
    SGDConfig,
)
from .project import (
    SCHEMA_VERSION,
    Project,
    data_check_part,
    parse_project,
    uneven_batch_warnings,
)
from .strategy import STRATEGY_KINDS, StrategyConfig, canonical_device
from .training import (
    CustomCode,
    EvaluationConfig,
    InputDistribution,
    MixedPrecision,
    TrainingConfig,
    split_counts,
)

__all__ = [
    "DATA_MODELS",
    "DATA_SOURCES",
    "LAYER_KINDS",
    "LAYER_TYPES",
    "MAX_DIMENSION",
    "MAX_SEED",
    "MODEL_KINDS",
    "OPTIMIZER_KINDS",
    "SCHEMA_VERSION",
    "STRATEGY_KINDS",
    "AdagradConfig",
    "AdamConfig",
    "BatchNormalizationLayer",
    "ConstantData",
    "Conv1DLayer",
    "Conv2DLayer",
    "CsvData",
    "CustomCode",
    "DataConfig",
    "DenseLayer",
    "DropoutLayer",
    "EmbeddingLayer",
    "EvaluationConfig",
    "FlattenLayer",
    "GRULayer",
    "ImageFolderData",
    "Initializer",
    "InputDistribution",
    "LSTMLayer",
    "LaunchConfig",
    "Layer",
    "LayerNormalizationLayer",
    "LossConfig",
    "MixedPrecision",
    "ModelConfig",
    "NumpyData",
    "OptimizerConfig",
    "Project",
    "RMSpropConfig",
    "Regularizer",
    "RescalingLayer",
    "SGDConfig",
    "SshHost",
    "StrategyConfig",
    "SyntheticClassification",
    "SyntheticRegression",
    "TFRecordData",
    "TextFolderData",
    "TrainingConfig",
    "canonical_device",
    "data_check_part",
    "parse_project",
    "split_counts",
    "uneven_batch_warnings",
]
