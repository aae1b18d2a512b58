"""Builds the ``tf.distribute`` strategy a project asks for (imports TensorFlow).

:func:`configure_devices` must run before TensorFlow initializes its devices: the
logical CPU split and GPU memory growth cannot be changed afterwards.
"""

from __future__ import annotations

import signal

import tensorflow as tf

from ..config import StrategyConfig
from ..tf_config import chief_of

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


def configure_devices(config: StrategyConfig, *, memory_growth: bool = True) -> None:
    """Splits the CPU into logical devices and sets whether GPUs grow their memory on demand.

    Memory growth (``training.gpu_memory_growth``) lets several engine processes (a
    local cluster, a device probe beside a run) share one GPU instead of the first
    one taking all its memory.
    """
    for gpu in tf.config.list_physical_devices("GPU"):
        tf.config.experimental.set_memory_growth(gpu, memory_growth)
    if config.cpu_replicas > 1:
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(config.cpu_replicas)]
        )


class DeviceError(ValueError):
    """The project asks for a device this machine lacks; the message lists the ones it has."""


def build_strategy(config: StrategyConfig) -> tf.distribute.Strategy:
    """The strategy ``config`` names, on devices that exist (after :func:`configure_devices`)."""
    kind = config.kind
    check_devices(config)
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
        # back, so SIGTERM still stops the run (engine.child_main, engine.tf.preemption).
        if sigterm is not None:  # None: a handler set outside Python, none of the engine's
            signal.signal(signal.SIGTERM, sigterm)
        return strategy
    if kind == "tpu":
        return _tpu_strategy(config.tpu)
    if kind == "parameter_server":
        resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
        return tf.distribute.ParameterServerStrategy(resolver)
    raise ValueError(f"unknown strategy kind {kind!r}")


def check_devices(config: StrategyConfig) -> None:
    """Fails at once when ``strategy.devices`` names a device TensorFlow does not list.

    The strategies accept any name: soft placement quietly runs a missing GPU's
    replica on the CPU, and several missing ones leave the first step waiting for
    ever. The logical devices are the ones a strategy can use, the CPU split of
    :func:`configure_devices` included.
    """
    if not config.devices:
        return
    available = [device.name for device in tf.config.list_logical_devices()]
    missing = missing_devices(config.devices, available)
    if missing:
        physical = [device.name for device in tf.config.list_physical_devices()]
        raise DeviceError(
            f"strategy.devices: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            f"not on this machine, which has {', '.join(available)} "
            f"(physical: {', '.join(physical)}); list some of those, or omit strategy.devices "
            "to use every GPU (else the CPU)"
        )


def missing_devices(requested: list[str], available: list[str]) -> list[str]:
    """The requested names that are none of ``available``: ``/gpu:0`` is ``/device:GPU:0``."""
    have = {_local_device(name) for name in available}
    return [name for name in requested if _local_device(name) not in have - {None}]


def _local_device(name: str) -> tuple[str, int] | None:
    """(type, index) of a device of this process; None for a remote or unreadable name."""
    try:
        spec = tf.DeviceSpec.from_string(name)
    except ValueError:
        return None
    if spec.job not in (None, "localhost") or spec.replica not in (None, 0):
        return None
    if spec.task not in (None, 0) or spec.device_type is None:
        return None
    return spec.device_type.upper(), spec.device_index or 0


def _tpu_strategy(tpu: str | None) -> tf.distribute.TPUStrategy:
    """TPUStrategy, or one line saying why no TPU answers (TensorFlow raises a traceback)."""
    if tpu == "local" and not tf.config.list_physical_devices("TPU"):
        devices = ", ".join(device.name for device in tf.config.list_physical_devices())
        raise DeviceError(
            f"strategy.tpu: this machine has no TPU (it has {devices}); give a TPU's name or "
            "grpc:// address, or choose another strategy.kind"
        )
    try:
        resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
        tf.config.experimental_connect_to_cluster(resolver)
        tf.tpu.experimental.initialize_tpu_system(resolver)
    except (OSError, ValueError, tf.errors.OpError) as exc:
        reason = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
        raise DeviceError(
            f"strategy.tpu: no TPU answers at {tpu!r} ({reason}); check the name or address"
        ) from None
    return tf.distribute.TPUStrategy(resolver)


def _first_device() -> str:
    gpus = tf.config.list_logical_devices("GPU")
    return gpus[0].name if gpus else "/cpu:0"


def replica_devices(strategy: tf.distribute.Strategy) -> list[str]:
    """The devices of this process's replicas, as TensorFlow names them.

    The default strategy has no device list (its ``worker_devices`` raises): its one
    replica runs where TensorFlow places ops, on the first GPU, else on the CPU.
    """
    try:
        devices = strategy.extended.worker_devices
    except AttributeError:
        return []
    except RuntimeError:
        local = tf.DeviceSpec(job="localhost", replica=0, task=0)
        return [local.make_merged_spec(tf.DeviceSpec.from_string(_first_device())).to_string()]
    return [str(device) for device in devices]


def strategy_devices(strategy: tf.distribute.Strategy) -> list[str]:
    """The devices the strategy's replicas run on, else its first parameter device."""
    devices = replica_devices(strategy)
    if devices:
        return devices
    extended = strategy.extended
    return [str(extended.parameter_devices[0])] if extended.parameter_devices else []


def in_cluster(strategy: tf.distribute.Strategy) -> bool:
    """True for one task of a cluster of processes (its TF_CONFIG names its task)."""
    resolver = getattr(strategy, "cluster_resolver", None)
    return resolver is not None and bool(resolver.task_type)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """The task that keeps checkpoints and writes metrics: the chief, else worker 0.

    A single-process run (no cluster resolver, or one without a task type) is its
    own chief.
    """
    if not in_cluster(strategy):
        return True
    resolver = strategy.cluster_resolver
    chief = chief_of(resolver.cluster_spec().as_dict())
    return (resolver.task_type, resolver.task_id) == (chief.type, chief.index)
