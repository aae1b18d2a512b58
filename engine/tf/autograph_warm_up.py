"""AutoGraph's conversions of the engine's step and input code, done by a warm engine ahead
of its run (imports TensorFlow).

Tracing a run's step converts each Python function it calls with AutoGraph (source parsed,
rewritten, compiled): about a fifth of a warm engine's time from its job to the first step
(0.4 s of the seed example's 2.2 s, 1.7 s of the digits example's 10 s, on a loaded
2-core machine). AutoGraph keeps each conversion by the function's code object, and
every run makes its step functions from the same code, so a warm engine that converts
them while it waits for its job traces its run without converting anything. Converting
needs no device and no TensorFlow context: the run's own device setup still comes first.

The conversions are AutoGraph's own, cached the way ``tf.function`` and ``tf.data`` ask
for them, so the traced graph, and every number the run computes, are the same.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterator

from tensorflow.python.autograph.core import converter
from tensorflow.python.autograph.impl import api

from . import evaluation, input_pipeline, step_runners
from .data_sources import class_folders, image_folder

FUNCTION_HOLDERS: tuple[Callable[..., object], ...] = (
    step_runners.ReplicaStepRunner.__init__,
    step_runners.StepRunner.__init__,
    input_pipeline.distribute_input,
    evaluation.Evaluator.__init__,
    evaluation._metric_sums,
    image_folder.decode_check.__wrapped__,
    image_folder.image_decoder,
    class_folders.label_encoder,
)
"""Functions whose nested functions a run converts (the seed example's first)."""

TF_FUNCTIONS = frozenset({"distributed_step", "fused_steps", "eval_step"})
"""The nested functions given to ``tf.function`` itself, which asks for their conversion
with other options than a call from inside a traced function, or ``tf.data``'s ``map``."""

CONVERTED_AS_THEY_ARE: tuple[Callable[..., object], ...] = (
    input_pipeline.replica_slice,
    image_folder.decode_pixels,
    image_folder.scale,
    image_folder.scale_batch,
    class_folders.encode_label,
)
"""Module-level functions a run's traced code calls (or ``tf.data`` maps) themselves."""


def warm_up_autograph(job_waiting: Callable[[], bool]) -> int:
    """Converts the run's functions ahead of it; returns how many conversions were made.

    ``job_waiting`` is asked before each conversion: a job that arrived is not kept
    waiting behind the rest (what is left is converted by its run, as without a warm-up).
    """
    done = 0
    for function, user_requested in _conversions():
        if job_waiting():
            break
        try:
            api._TRANSPILER.transform(function, _context(user_requested))
        except Exception:  # the run converts it again and reports its own error
            continue
        done += 1
    return done


def _conversions() -> Iterator[tuple[types.FunctionType, bool]]:
    for holder in FUNCTION_HOLDERS:
        for code in _nested_code(holder.__code__):
            yield _function_of(code, holder), code.co_name in TF_FUNCTIONS
    for function in CONVERTED_AS_THEY_ARE:
        assert isinstance(function, types.FunctionType)
        yield function, False


def _nested_code(code: types.CodeType) -> Iterator[types.CodeType]:
    """Every function defined inside ``code`` (lambdas too), at any depth."""
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            if not constant.co_name.startswith("<") or constant.co_name == "<lambda>":
                yield constant
            yield from _nested_code(constant)


def _function_of(code: types.CodeType, holder: Callable[..., object]) -> types.FunctionType:
    """A function of ``code`` with empty closure cells: AutoGraph converts the code, and
    each run's own function fills the cells of the conversion it is handed."""
    cells = tuple(types.CellType() for _ in code.co_freevars)
    return types.FunctionType(code, holder.__globals__, code.co_name, None, cells)


def _context(user_requested: bool) -> converter.ProgramContext:
    """The options ``tf.function`` (``user_requested``) or a traced call and ``tf.data``
    convert with: AutoGraph's cache keeps a conversion per code object and options."""
    return converter.ProgramContext(
        options=converter.ConversionOptions(
            recursive=True, user_requested=user_requested, optional_features=None
        )
    )
