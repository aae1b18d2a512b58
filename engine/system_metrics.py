"""What each task uses and waits for, sampled beside its training loop (no TensorFlow).

A :class:`Sampler` thread wakes every :data:`TICK_S`, and every :data:`SAMPLE_S` sends a
:class:`~engine.messages.Resources` message over the run's channel and appends it to the
run folder's ``system_metrics.csv`` and to a TensorBoard event file of its own: the
process's CPU use, resident memory and read/write bytes (psutil), each NVIDIA GPU's
utilisation and memory (NVML, through ``nvidia-ml-py``, where both the library and a GPU
are there; else no GPU columns at all), how long the process was held up, and how much
of its steps waited for input (handed over by the :class:`StepClock` hook).

Why a thread and ticks: reading psutil and NVML costs tens of microseconds, done once a
second off the training thread, so the steps never wait for it. "Held up" is the time
the sampler's own short sleeps overran: a process that is stopped (SIGSTOP), throttled by
a CPU quota or starved on a busy machine wakes late, and a task held up holds up every
peer that waits for it in the next collective. That is how a straggler shows from inside.
"""

from __future__ import annotations

import contextlib
import csv
import math
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import psutil

from .channel import Channel
from .event_file import event, record, scalar_value
from .fileio import open_text
from .findings import Findings
from .loop import Executed, LoopHook
from .messages import GpuUse, Resources
from .run_folder import (
    SYSTEM_METRICS_FILE,
    TASKS_DIR,
    TENSORBOARD_DIR,
    RunFolderError,
    update_status,
)

TICK_S = 0.05
"""How often the sampler wakes to see whether the process was held up."""
SAMPLE_S = 1.0
"""How often a sample is sent and written: often enough to follow a run live, rarely
enough that a day's run writes tens of thousands of rows, not millions."""
HELD_TOLERANCE_S = 0.005
"""A wake-up later than this counts as held up: a thread scheduled a little late on an idle
machine (or waiting a moment for Python's lock) is not a stopped process."""
MB = 1 << 20
SWITCH_VARIABLE = "DISTLOOP_SYSTEM_METRICS"
"""Set to ``off`` in the engine's environment, no task samples anything (the benchmark's
baseline; a machine where even a thread a second is too much)."""


class GpuReader:
    """Each NVIDIA GPU's utilisation and memory, read through NVML (``pynvml``)."""

    def __init__(self, nvml: Any, handles: list[tuple[int, Any]]) -> None:
        self._nvml = nvml
        self._handles = handles

    @property
    def count(self) -> int:
        return len(self._handles)

    def read(self) -> list[GpuUse]:
        gpus = []
        for index, handle in self._handles:
            rates = self._nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self._nvml.nvmlDeviceGetMemoryInfo(handle)
            gpus.append(
                GpuUse(
                    index=index,
                    utilization_percent=float(rates.gpu),
                    memory_used_bytes=int(memory.used),
                    memory_total_bytes=int(memory.total),
                )
            )
        return gpus

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._nvml.nvmlShutdown()


def open_gpus() -> GpuReader | None:
    """NVML's view of this task's GPUs; None without the library, a driver or a GPU.

    Which GPUs: those ``CUDA_VISIBLE_DEVICES`` gives the task when it lists indices
    (how a launcher splits one machine's GPUs between tasks), else all of them. A
    machine without NVIDIA's driver is the common case, not a fault: nothing is said.
    """
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # NVMLError_LibraryNotFound, _DriverNotLoaded...: no NVIDIA GPU here
        return None
    try:
        indices = _visible_indices(pynvml.nvmlDeviceGetCount())
        handles = [(i, pynvml.nvmlDeviceGetHandleByIndex(i)) for i in indices]
    except Exception:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        return None
    if not handles:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()
        return None
    return GpuReader(pynvml, handles)


def _visible_indices(count: int) -> list[int]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return list(range(count))
    parts = [part.strip() for part in visible.split(",") if part.strip()]
    if not all(part.isdigit() for part in parts):  # UUIDs: NVML's order, all of them
        return list(range(count))
    return [int(part) for part in parts if int(part) < count]


class StepClock(LoopHook):
    """The loop's side of the sampler: each execution's steps, seconds and input wait.

    The loop measures them (``engine.loop.Executed``); a fused execution's wait may be a
    tensor the step function returned, which the sampler thread fetches, so the training
    thread never waits for it. Every ``after_steps`` costs one lock and one append.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[tuple[int, float, Any]] = []
        self.last_step: int | None = None

    def after_steps(self, executed: Executed) -> None:
        with self._lock:
            self._pending.append((executed.count, executed.step_s, executed.input_wait_s))
            self.last_step = executed.last_step

    def take(self) -> tuple[int, float, float | None]:
        """Steps, their seconds and their input wait since the last call (fetching waits);
        the wait is None when an execution could not time it."""
        with self._lock:
            pending, self._pending = self._pending, []
        steps = sum(count for count, _, _ in pending)
        seconds = sum(step_s for _, step_s, _ in pending)
        if any(wait is None for _, _, wait in pending):
            return steps, seconds, None
        waited = 0.0
        for _, _, wait in pending:
            with contextlib.suppress(Exception):  # a failed step's tensor: its run fails
                waited += float(wait)
        return steps, seconds, waited


class ResourceFiles:
    """``system_metrics.csv`` and a TensorBoard event file, both appended to at each sample.

    The CSV's GPU columns are fixed by the first sample (a task's GPUs do not come and
    go); a resumed run appends to the rows its first part wrote, under the same header.
    """

    def __init__(self, run_dir: Path) -> None:
        self._csv_path = run_dir / SYSTEM_METRICS_FILE
        self._csv: TextIO | None = None
        self._writer: Any = None
        self._columns: list[str] = []
        folder = run_dir / TENSORBOARD_DIR
        if folder.is_symlink():  # the run fails on it (engine.tf.tensorboard); write nothing
            raise RunFolderError(f"{folder} is a symbolic link: event files go into the run folder")
        folder.mkdir(parents=True, exist_ok=True)
        name = f"events.out.tfevents.{time.time():.0f}.{socket.gethostname()}.system"
        flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0)
        self._events = os.fdopen(os.open(folder / name, flags, 0o666), "ab")
        self._events.write(record(event(time.time())))
        self._events.flush()

    def write(self, sample: Resources) -> None:
        row = sample_row(sample)
        if self._csv is None:
            self._open_csv(list(row))
        assert self._writer is not None and self._csv is not None
        self._writer.writerow([_cell(row.get(column)) for column in self._columns])
        self._csv.flush()
        values = [
            scalar_value(f"system/{name}", value)
            for name, value in row.items()
            if name not in ("time", "step") and value is not None and math.isfinite(value)
        ]
        self._events.write(record(event(sample.time, sample.step or 0, values)))
        self._events.flush()

    def _open_csv(self, columns: list[str]) -> None:
        # Never through a link: a resumed folder's file may be anyone's (engine.fileio).
        self._csv = open_text(self._csv_path, "a", newline="")
        self._writer = csv.writer(self._csv)
        if self._csv.tell() > 0:  # a resumed run's: its rows go on under the same header
            with open_text(self._csv_path, "r", newline="") as old:
                self._columns = next(csv.reader(old), columns)
        else:
            self._columns = columns
            self._writer.writerow(columns)

    def close(self) -> None:
        """Closes both files. A disk that cannot take their last bytes (a full one) costs
        the samples only: the run reports its own outcome, not this file's."""
        for handle in (self._csv, self._events):
            if handle is not None:
                with contextlib.suppress(OSError):
                    handle.close()


def sample_row(sample: Resources) -> dict[str, float | None]:
    """A sample as the CSV's and TensorBoard's named values (MB, shares of one)."""
    row: dict[str, float | None] = {
        "time": sample.time,
        "step": sample.step,
        "cpu_percent": sample.cpu_percent,
        "rss_mb": sample.rss_bytes / MB,
        "read_mb": None if sample.read_bytes is None else sample.read_bytes / MB,
        "write_mb": None if sample.write_bytes is None else sample.write_bytes / MB,
        "held_share": sample.held_s / sample.interval_s if sample.interval_s > 0 else 0.0,
        "steps": sample.steps,
        "step_s": sample.step_s,
        "input_wait_s": sample.input_wait_s,
        "input_wait_share": sample.input_wait_share,
    }
    for gpu in sample.gpus or []:
        row[f"gpu{gpu.index}_util_percent"] = gpu.utilization_percent
        row[f"gpu{gpu.index}_memory_mb"] = gpu.memory_used_bytes / MB
    return row


def read_samples(run_dir: Path) -> dict[str | None, list[dict[str, float | None]]]:
    """A past run's samples by task, as :func:`sample_row` made them: a single run's own
    ``system_metrics.csv`` (task None), a cluster's in each task's folder. Rows a killed
    run cut short, and files that are not there, are left out."""
    files = {None: run_dir / SYSTEM_METRICS_FILE}
    tasks = run_dir / TASKS_DIR
    if tasks.is_dir():
        files = {
            folder.name.replace("-", ":", 1): folder / SYSTEM_METRICS_FILE
            for folder in sorted(tasks.iterdir())
        }
    samples: dict[str | None, list[dict[str, float | None]]] = {}
    for task, path in files.items():
        try:
            with open_text(path, "r", newline="") as rows:
                samples[task] = [row for row in map(_float_row, csv.DictReader(rows)) if row]
        except (OSError, UnicodeDecodeError, csv.Error):
            continue
    return samples


def _float_row(row: dict[str | None, str | list[str] | None]) -> dict[str, float | None]:
    values: dict[str, float | None] = {}
    for name, text in row.items():
        if name is None or not isinstance(text, str):
            return {}  # more cells than the header names: a damaged row
        try:
            values[name] = float(text) if text else None
        except ValueError:
            return {}
    return values


def _cell(value: float | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else repr(round(value, 6))


class Sampler:
    """The sampling thread of one task: see the module's docstring."""

    def __init__(
        self,
        channel: Channel,
        clock: StepClock,
        files: ResourceFiles | None,
        *,
        tick_s: float = TICK_S,
        sample_s: float = SAMPLE_S,
    ) -> None:
        self._channel = channel
        self._clock = clock
        self._files = files
        self._tick_s = tick_s
        self._sample_s = sample_s
        self._process = psutil.Process()
        self._process.cpu_percent()  # the first call only starts psutil's interval
        self._gpus = open_gpus()
        self._findings = Findings()
        """This task's own findings (input-bound), for its engine.log and status.json; a
        cluster's straggler is the launcher's to name, which sees every task."""
        self._failed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="system-metrics", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, run_dir: Path | None = None) -> None:
        """Sends the last part-interval's sample, then ends the thread; the findings go
        into ``run_dir``'s status.json, the run's summary."""
        self._stop.set()
        self._thread.join()
        if run_dir is not None:
            with contextlib.suppress(OSError, ValueError):
                update_status(run_dir, findings=[f.line for f in self._findings.current])
        if self._gpus is not None:
            self._gpus.close()
        if self._files is not None:
            self._files.close()

    def _run(self) -> None:
        began = time.monotonic()
        held = 0.0
        while True:
            before = time.monotonic()
            stopping = self._stop.wait(self._tick_s)
            late = time.monotonic() - before - self._tick_s
            if not stopping and late > HELD_TOLERANCE_S:
                held += late
            now = time.monotonic()
            if stopping or now - began >= self._sample_s:
                try:
                    self._send(now - began, held)
                except Exception as exc:  # a sample is never worth a run; said once
                    if not self._failed:
                        self._failed = True
                        self._channel.log(f"a system metrics sample failed: {exc!r}", "warning")
                began, held = now, 0.0
            if stopping:
                return

    def _send(self, interval_s: float, held_s: float) -> None:
        steps, step_s, waited = self._clock.take()
        with self._process.oneshot():
            cpu = self._process.cpu_percent()
            rss = self._process.memory_info().rss
            io = _io_counters(self._process)
        sample = Resources(
            time=time.time(),
            interval_s=interval_s,
            step=self._clock.last_step,
            cpu_percent=cpu,
            rss_bytes=rss,
            read_bytes=None if io is None else io[0],
            write_bytes=None if io is None else io[1],
            held_s=min(held_s, interval_s),
            steps=steps,
            step_s=step_s,
            input_wait_s=None if waited is None else min(waited, step_s) if steps else 0.0,
            gpus=self._gpus.read() if self._gpus is not None else None,
        )
        self._channel.send(sample)
        if self._findings.add(sample):
            for finding in self._findings.new:
                self._channel.log(finding.line, "warning", forward=False)
        if self._files is not None:
            self._files.write(sample)


def _io_counters(process: psutil.Process) -> tuple[int, int] | None:
    """Bytes the process read and wrote; None where the system does not say (macOS)."""
    try:
        counters = process.io_counters()  # type: ignore[attr-defined]
    except (AttributeError, psutil.AccessDenied, NotImplementedError):
        return None
    return int(counters.read_bytes), int(counters.write_bytes)


@contextlib.contextmanager
def sampling(channel: Channel, run_dir: Path | None) -> Iterator[StepClock | None]:
    """Samples this task while the block runs; gives the hook that feeds it the steps
    (None when :data:`SWITCH_VARIABLE` turns sampling off).

    Writes nothing without a run folder, and a folder it cannot write (a full disk)
    costs the samples' files only: the messages still go out.
    """
    if os.environ.get(SWITCH_VARIABLE, "").lower() == "off":
        yield None
        return
    clock = StepClock()
    files = None
    if run_dir is not None:
        try:
            files = ResourceFiles(run_dir)
        except OSError as exc:
            channel.log(f"system metrics are not written to the run folder: {exc}", "warning")
    sampler = Sampler(channel, clock, files)
    sampler.start()
    try:
        yield clock
    finally:
        sampler.stop(run_dir)
