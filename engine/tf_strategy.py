"""Builds the ``tf.distribute`` strategy a project asks for (imports TensorFlow).

:func:`configure_devices` must run before TensorFlow initializes its devices: the
logical CPU split and GPU memory growth cannot be changed afterwards.
"""

from __future__ import annotations

import signal

import tensorflow as tf

from engine.config import StrategyConfig

_CROSS_DEVICE_OPS = {
    "nccl": lambda: tf.distribute.NcclAllReduce(),
    "hierarchical_copy": lambda: tf.distribute.HierarchicalCopyAllReduce(),
    "reduce_to_one_device": lambda: tf.distribute.ReductionToOneDevice(),
}
_COMMUNICATION = {
    "auto": tf.distribute.experimental.CommunicationImplementation.AUTO,
    "ring": tf.distribute.experimental.CommunicationImplementation.RING,
    "nccl": tf.distribute.experimental.CommunicationImplementation.NCCL,
}


def configure_devices(config: StrategyConfig) -> None:
    """Splits the CPU into logical devices and lets GPUs grow their memory on demand.

    Memory growth lets several engine processes (a local cluster, a device probe
    beside a run) share one GPU instead of the first one taking all its memory.
    """
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, True)
    if config.cpu_replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(config.cpu_replicas)]
        )


def build_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    kind = config.kind
    if kind == "default":
        return tf.distribute.get_strategy()
    if kind == "one_device":
        device = config.devices[0] if config.devices else _first_device()
        return tf.distribute.OneDeviceStrategy(device)
    if kind == "mirrored":
        devices = config.devices
        if config.cpu_replicas > 1:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        ops = _CROSS_DEVICE_OPS.get(config.cross_device_ops)
        return tf.distribute.MirroredStrategy(
            devices=devices, cross_device_ops=ops() if ops else None
        )
    if kind == "multi_worker_mirrored":
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=_COMMUNICATION[config.communication],
            timeout_seconds=config.communication_timeout_s,
        )
        sigterm = signal.getsignal(signal.SIGTERM)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        # With a cluster, its coordination agent installs TensorFlow's C++ SIGTERM handler
        # (a preemption notifier that only logs here) over the engine's; put the engine's
        # back, so SIGTERM still stops the run (engine.child_main, engine.tf_preemption).
        if sigterm is not None:  # None: a handler set outside Python, none of the engine's
            signal.signal(signal.SIGTERM, sigterm)
        return strategy
    if kind == "tpu":
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=config.tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
        return tf.distribute.TPUStrategy(resolver)
    if kind == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(resolver)
    raise ValueError(f"unknown strategy kind {kind!r}")


def _first_device() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "/cpu:0"


def strategy_devices(strategy: tf.distribute.Strategy) -> list[str]:
    """The devices the strategy's replicas run on, as TensorFlow names them."""
    extended = strategy.extended
    devices = getattr(extended, "worker_devices", None)
    if devices:
        return [str(d) for d in devices]
    return [str(extended.parameter_devices[0])] if extended.parameter_devices else []


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """The task that keeps checkpoints and writes metrics: the chief, else worker 0.

    A single-process run (no cluster resolver, or one without a task type) is its
    own chief.
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief
