"""Input pipeline benchmarks (issue 13): an image folder through Distloop's pipeline vs Keras's.

Run with ``python -m benchmarks.data_bench [rounds] [resized]`` from the repository root
(``python -m benchmarks.data_bench memory`` and ``... csv`` for the streaming measurements
below). It
writes a folder of PNGs (10 classes of 64x64 RGB images, encoded with ``tf.io.encode_png``;
72x72 with ``resized``, so both pipelines must resize them to the model's 64x64), then
reads it, one shuffled epoch at a time, with Distloop's ``image_folder`` pipeline
(``build_training_data``) and with ``tf.keras.utils.image_dataset_from_directory``
(same image size, batch size and shuffling) in paired rounds (order alternating), and
prints the best images/s of each, the ratio of the bests and the median of the rounds'
ratios (steadier on a shared machine), with the median process CPU time per image of
each (the work done, which other load on the machine moves less than the wall time).
Both decode every image in a parallel map, batch, and prefetch. Keras always resizes (to
the same size too) and batches float32 images in [0, 255]; Distloop resizes only when
some image is not the model's size, batches the decoder's uint8 pixels then, and scales
each batch to float32 in [0, 1]. Before timing,
one epoch of each is compared: the same number of images, float32 of the same shape, and
the same images up to that scale. Distloop's check of every file before a run (a damaged
image is named then, not failed on inside the step) is timed apart: it happens once per
run, not per epoch.

``mixing`` (``... mixing [rounds]``, about a minute) writes a folder larger than the
shuffle buffer, 10 classes of 3,000 PNGs (hard links), reads it with a buffer of 2,048
through both pipelines (checked like for like: the same images an epoch), and prints how
the first batches mix the classes in each, and in the shuffle Distloop made before (a
buffer of names over the class-sorted list), then one epoch's images/s of each.

``memory`` (root, cgroup v1; about 6 minutes and 18 GB of disk, removed afterwards, also
when interrupted) writes an uncompressed .npz of ``MEMORY_ROWS`` x ``MEMORY_FEATURES``
float32 (16.4 GB, over 10 x the memory limit L, ``MEMORY_LIMIT``, 1.5 GiB) and one of a
tenth of the rows, in chunks, and runs ``python -m distloop.engine`` (``distloop run``) on
each for one epoch in a memory cgroup: the big file streamed (``data.stream: true``) and
loaded under L (refused by distloop's check before loading, ``engine.memory_check``, or
killed by the OOM killer), the small one streamed under L and loaded without it (a 12 GiB
cap protects the machine). It samples the engine process's resident memory (anonymous and
file-mapped) every ``SAMPLE_S`` from /proc, with the step the CLI last printed, and
prints the peak, the medians of the epoch's first and last fifths,
the peak in each tenth, the cgroup's peak charge and OOM kills, the times and MB/s, the
load average, how the loaded big run ended (with what distloop printed), and the ratios of
the peaks. Without a cgroup it runs without the limit and does not load the big file.

``csv`` (about 3 minutes, ~0.5 GB of disk, removed afterwards) writes a wide CSV
(``CSV_WIDE``: 2,048 float32 features and a class label a row) and a narrow one
(``CSV_NARROW``: 10 features), each with a copy of its first tenth, and times
``data.stream: true`` through the engine's pipeline (``build_training_data``: the check of
every value before the run, then one shuffled epoch of batches) against ``OldCsvDataset``,
a copy of the pipeline it replaced (``tf.data.experimental.CsvDataset``, a row at a time).
The old pipeline reads the tenth (it is 10-20 x slower; a rate is a rate); both read the
tenth once first, compared batch for batch: the same values, dtypes and order. It prints,
over paired rounds (``... csv [rounds]``, 3 by default, the order alternating), the best
MB/s of the check and of the epoch for each, the median of the rounds' ratios, and the
process CPU seconds per GB.
"""

from __future__ import annotations

import csv
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import numpy as np
import tensorflow as tf
from distloop.engine.config import CsvData, Project
from distloop.engine.data_sources import DataError
from distloop.engine.project_file import load_project_data
from distloop.engine.tf.data import build_training_data
from distloop.engine.tf.data_sources import csv as csv_source
from distloop.engine.tf.data_sources.base import labels_dtype
from distloop.engine.tf.data_sources.csv import LabelCheck, first_bad_row

from benchmarks.quick import sized

CLASSES = 10
PER_CLASS = sized(300, 3)
SIZE = 64
BATCH = 64


RESIZED_FROM = 72


def write_folder(root: Path, size: int = SIZE) -> int:
    """``CLASSES`` x ``PER_CLASS`` random-noise PNGs (incompressible, like photos' detail)."""
    rng = np.random.default_rng(0)
    for label in range(CLASSES):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True)
        for index in range(PER_CLASS):
            pixels = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
            (folder / f"{index:04d}.png").write_bytes(tf.io.encode_png(pixels).numpy())
    return CLASSES * PER_CLASS


def distloop_dataset(root: Path, shuffle_buffer: int = BATCH * 8) -> tf.data.Dataset:
    project = load_project_data(
        {
            "schema_version": 1,
            "model": {
                "input_shape": [SIZE, SIZE, 3],
                "layers": [{"kind": "dense", "units": CLASSES}],
            },
            "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
            "data": {
                "source": "image_folder",
                "path": str(root),
                "global_batch_size": BATCH,
                "shuffle_buffer": shuffle_buffer,
            },
            "training": {"epochs": 1, "seed": 0},
        }
    )
    return build_training_data(project).dataset


def keras_dataset(root: Path) -> tf.data.Dataset:
    return tf.keras.utils.image_dataset_from_directory(
        root,
        image_size=(SIZE, SIZE),
        batch_size=BATCH,
        shuffle=True,
        seed=0,
        verbose=False,
    ).prefetch(tf.data.AUTOTUNE)


def check_like_for_like(ours: tf.data.Dataset, keras: tf.data.Dataset) -> None:
    """One epoch of each: the same images (Distloop's scaled to [0, 1]), float32, same shape."""
    epochs = []
    for dataset in (ours, keras):
        images = np.concatenate([batch.numpy() for batch, _ in dataset])
        assert images.dtype == np.float32 and images.shape[1:] == (SIZE, SIZE, 3)
        epochs.append(np.sort(images.reshape(len(images), -1).sum(axis=1)))
    assert len(epochs[0]) == len(epochs[1]), "the epochs differ in length"
    np.testing.assert_allclose(epochs[0] * 255.0, epochs[1], rtol=1e-5)


def images_per_second(dataset: tf.data.Dataset) -> float:
    start, count = time.perf_counter(), 0
    for images, _ in dataset:
        count += int(images.shape[0])
    return count / (time.perf_counter() - start)


def cpu_seconds() -> float:
    """This process's CPU time so far, every thread's (tf.data's included)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed_epoch(dataset: tf.data.Dataset, rates: list[float], cpu: list[float], total: int) -> None:
    """One epoch: its images/s into ``rates``, its CPU microseconds per image into ``cpu``."""
    started = cpu_seconds()
    rates.append(images_per_second(dataset))
    cpu.append((cpu_seconds() - started) / total * 1e6)


MEMORY_LIMIT = 3 * 2**29
"""L, 1.5 GiB: the cgroup v1 memory limit on the CLI and its engine together (TensorFlow and
the engine alone take ~610 MiB)."""
MEMORY_FEATURES = sized(2048, 16)
"""Wide rows (8 KiB of float32): the file is read in long runs and the small model's step
costs little per byte, so an epoch of 16 GB takes minutes."""
MEMORY_ROWS = sized(2_000_000, 4_000)
"""16.4 GB of features: over 10 x L."""
MEMORY_BATCH = sized(2048, 256)
"""16 MiB batches; the shuffle buffer is one batch, so a batch's rows lie close together."""
LOADED_LIMIT = 12 * 2**30
"""The small file loaded: a limit only to keep a runaway off the shared machine."""
CGROUP_MEMORY = Path("/sys/fs/cgroup/memory")
SAMPLE_S = 0.5
WRITE_CHUNK_BYTES = 64 * 2**20


def write_npz(path: Path, rows: int, features: int) -> float:
    """An uncompressed .npz of ``x`` (rows x features float32 in [0, 1)) and ``y`` (rows x 1
    float32 0/1), written in chunks, never whole in memory; returns the seconds taken.

    The file's pages are dropped from the page cache after the write, so the engine reads
    from the disk and the pages it reads are charged to its cgroup, not to this process."""
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    chunk = max(1, WRITE_CHUNK_BYTES // (features * 4))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, width in (("x", features), ("y", 1)):
            header = {
                "descr": np.lib.format.dtype_to_descr(np.dtype(np.float32)),
                "fortran_order": False,
                "shape": (rows, width),
            }
            with archive.open(f"{name}.npy", "w", force_zip64=True) as member:
                np.lib.format.write_array_header_2_0(member, header)
                for start in range(0, rows, chunk):
                    count = min(chunk, rows - start)
                    if name == "x":
                        member.write(rng.random((count, width), dtype=np.float32))
                    else:
                        member.write(rng.integers(0, 2, (count, 1)).astype(np.float32))
    drop_cached(path)
    return time.perf_counter() - started


def drop_cached(path: Path) -> None:
    """Writes the file out and drops its pages from the page cache."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(descriptor)


class MemoryCgroup:
    """A cgroup v1 memory group with a limit; processes put in it take their children along.

    Page cache counts against a v1 limit too, but the kernel reclaims it before it kills."""

    def __init__(self, limit: int) -> None:
        self.path = CGROUP_MEMORY / f"distloop_bench_{os.getpid()}_{time.monotonic_ns()}"
        self.path.mkdir()
        try:
            for key in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
                if (self.path / key).exists():  # memsw: no swap past the limit either
                    (self.path / key).write_text(str(limit))
        except OSError:
            self.path.rmdir()
            raise

    def value(self, key: str) -> int:
        return int((self.path / key).read_text())

    def oom_kills(self) -> int:
        for line in (self.path / "memory.oom_control").read_text().splitlines():
            if line.startswith("oom_kill "):
                return int(line.split()[1])
        return 0

    def remove(self) -> None:
        """Removes the group once its last process has gone (the kernel takes a moment)."""
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"cannot remove {self.path}: processes are still in it")


def cgroups_work() -> bool:
    try:
        MemoryCgroup(MEMORY_LIMIT).remove()
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Sample:
    at: float
    """Seconds since the CLI started."""
    step: int | None
    """The last step the CLI had printed (None before the first)."""
    rss: int
    """The engine process's resident memory (bytes): anonymous plus mapped file pages."""
    anon: int
    file: int
    cli: int
    """The CLI's resident memory, in the same cgroup."""
    load: float


@dataclass(frozen=True)
class EngineRun:
    code: int
    err: str
    """What distloop printed on stderr."""
    samples: list[Sample]
    wall_s: float
    steps: int
    max_usage: int | None
    """The cgroup's peak charge (page cache included); None without a cgroup."""
    oom_kills: int
    engine_cpu_s: float

    @property
    def peak_rss(self) -> int:
        return max((sample.rss for sample in self.samples), default=0)

    @property
    def first_step_s(self) -> float:
        return next(sample.at for sample in self.samples if sample.step is not None)


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS, RssAnon and RssFile of ``pid`` in bytes (empty once it has gone)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            found[key] = int(value.split()[0]) * 1024
    return found


def _cpu_seconds(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _engine_pid(cli: int) -> int | None:
    """The engine: the CLI's child started by multiprocessing's spawn."""
    from benchmarks.engine_bench import _descendants

    for pid in _descendants(cli):
        try:
            if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
    return None


def engine_run(project: dict, folder: Path, limit: int | None, steps: int) -> EngineRun:
    """``python -m distloop.engine PROJECT.json`` (``distloop run``) in a memory cgroup of
    ``limit`` bytes (none: no cgroup), its engine's memory sampled every ``SAMPLE_S``."""
    path = folder / "project.json"
    path.write_text(json.dumps(project))
    command = [sys.executable, "-m", "distloop.engine", str(path), "--out", str(folder / "run")]
    command.append("--overwrite")
    group = None if limit is None else MemoryCgroup(limit)
    if group is not None:  # the shell joins the group, then becomes the CLI
        join = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(group.path / "cgroup.procs")]
        command = [*join, *command]
    try:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            return _follow(process, group, steps)
        finally:
            if process.poll() is None:  # interrupted: the CLI and its engine go too
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    finally:
        if group is not None:
            group.remove()


def _follow(process: subprocess.Popen[str], group: MemoryCgroup | None, steps: int) -> EngineRun:
    """Samples the engine until the CLI exits; the steps from its output, its error lines."""
    started = time.monotonic()
    last_step: list[int] = []
    err: list[str] = []

    def read_steps() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            if line.startswith("step="):
                last_step.append(int(line.split()[0].removeprefix("step=")))

    def read_err() -> None:
        assert process.stderr is not None
        err.extend(process.stderr)

    readers = [threading.Thread(target=read, daemon=True) for read in (read_steps, read_err)]
    for reader in readers:
        reader.start()
    samples: list[Sample] = []
    engine, cpu = None, 0.0
    while process.poll() is None:
        engine = engine or _engine_pid(process.pid)
        status = _proc_status(engine) if engine else {}
        if engine and status:
            cpu = _cpu_seconds(engine) or cpu
            samples.append(
                Sample(
                    at=time.monotonic() - started,
                    step=last_step[-1] if last_step else None,
                    rss=status["VmRSS"],
                    anon=status["RssAnon"],
                    file=status["RssFile"],
                    cli=_proc_status(process.pid).get("VmRSS", 0),
                    load=os.getloadavg()[0],
                )
            )
        time.sleep(SAMPLE_S)
    wall = time.monotonic() - started
    for reader in readers:
        reader.join()
    return EngineRun(
        code=process.returncode,
        err="".join(err),
        samples=samples,
        wall_s=wall,
        steps=steps,
        max_usage=group.value("memory.max_usage_in_bytes") if group else None,
        oom_kills=group.oom_kills() if group else 0,
        engine_cpu_s=cpu,
    )


def memory_project(path: Path, *, stream: bool) -> dict:
    return {
        "schema_version": 1,
        "model": {"input_shape": [MEMORY_FEATURES], "layers": [{"kind": "dense", "units": 1}]},
        "loss": {"kind": "binary_crossentropy", "from_logits": True},
        "data": {
            "source": "numpy",
            "path": str(path),
            "stream": stream,
            "global_batch_size": MEMORY_BATCH,
            "shuffle_buffer": MEMORY_BATCH,
        },
        "training": {"epochs": 1, "seed": 0},
    }


def _mib(count: float) -> str:
    return f"{count / 2**20:,.0f} MiB"


def _median_mib(samples: list[Sample], key: str) -> str:
    return _mib(float(np.median([getattr(sample, key) for sample in samples])))


def _died(run: EngineRun) -> str:
    """How a run ended, and the last lines distloop printed."""
    how = f"exit code {run.code}, {run.oom_kills} OOM kill(s) in its cgroup"
    lines = [line for line in run.err.splitlines() if line.strip()]
    shown = "\n    ".join(lines[-12:])
    return f"{how}, {run.wall_s:.0f} s after its start; distloop printed:\n    {shown}"


def _require_finished(run: EngineRun, what: str) -> None:
    if run.code:
        raise RuntimeError(f"{what} did not finish: {_died(run)}")


def _tenths(samples: list[Sample]) -> list[list[Sample]]:
    """The samples in ten consecutive runs of (nearly) equal length."""
    bounds = np.linspace(0, len(samples), 11).round().astype(int)
    return [samples[a:b] for a, b in pairwise(bounds) if b > a]


def report_streamed(run: EngineRun, size: int, limit: int | None) -> None:
    """Times, throughput and the engine's memory before the first step and over the epoch."""
    first = run.first_step_s
    epoch_s = run.wall_s - first
    during = [sample for sample in run.samples if sample.step is not None]
    before = [sample for sample in run.samples if sample.step is None]
    if len(during) < 2 or not before:  # quick mode's tiny file: an epoch of a sample or two
        print(
            f"  streamed {size / 1e9:,.2f} GB: finished, {run.steps} steps in {epoch_s:.1f} s, "
            f"{len(during)} memory sample(s) while stepping (one every {SAMPLE_S} s): too few "
            f"to compare the epoch's start and end; engine RSS peak {_mib(run.peak_rss)}"
        )
        return
    tenths = _tenths(during)
    early, late = tenths[0] + tenths[1], tenths[-2] + tenths[-1]
    loads = [sample.load for sample in run.samples]
    under = f"under a {_mib(limit)} limit" if limit else "without a limit"
    charge = (
        f"; the cgroup's peak charge {_mib(run.max_usage)} (page cache included, reclaimed at "
        f"the limit), {run.oom_kills} OOM kill(s)"
        if run.max_usage is not None
        else ""
    )
    print(
        f"  streamed {size / 1e9:,.2f} GB {under}: finished, {run.steps} steps; start to the "
        f"first step (TensorFlow, the model, the check of every value: one read of the file) "
        f"{first:.0f} s, the epoch {epoch_s:.0f} s ({size / 1e6 / epoch_s:,.0f} MB/s); engine "
        f"CPU {run.engine_cpu_s:.0f} s over {run.wall_s:.0f} s; load average "
        f"{min(loads):.1f}-{max(loads):.1f}\n"
        f"    engine RSS: peak {_mib(run.peak_rss)}, before the first step "
        f"{_mib(max(s.rss for s in before))}, during the epoch {_mib(max(s.rss for s in during))}"
        f"; median of the epoch's first fifth {_median_mib(early, 'rss')} (anon "
        f"{_median_mib(early, 'anon')}, file {_median_mib(early, 'file')}), of its last fifth "
        f"{_median_mib(late, 'rss')} (anon {_median_mib(late, 'anon')}, file "
        f"{_median_mib(late, 'file')}): late/early "
        f"{np.median([s.rss for s in late]) / np.median([s.rss for s in early]):.3f}; by tenths "
        f"of the epoch (max) {', '.join(str(max(s.rss for s in t) // 2**20) for t in tenths)} "
        f"MiB ({len(during)} samples); CLI RSS {_mib(max(s.cli for s in run.samples))}{charge}"
    )


def memory() -> None:
    """One epoch streamed over an .npz 10x larger than a memory limit L, the same file loaded
    under L, and a tenth of the file streamed and loaded (the loaded one without L)."""
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    limit = MEMORY_LIMIT if cgroups_work() else None
    if limit is None:
        print(
            f"no cgroup v1 memory controller at {CGROUP_MEMORY} (root needed): no limit, and "
            "the big file is not loaded (it would meet the machine's OOM killer)"
        )
    small_rows = MEMORY_ROWS // 10
    row_bytes = (MEMORY_FEATURES + 1) * 4
    needed = (MEMORY_ROWS + small_rows) * row_bytes
    with tempfile.TemporaryDirectory(prefix="distloop_memory_") as tmp:
        folder = Path(tmp)
        free = shutil.disk_usage(folder).free
        if free < needed + sized(10 * 10**9, 0):
            raise SystemExit(f"{folder}: {needed / 1e9:.1f} GB needed, {free / 1e9:.1f} GB free")
        big, small = folder / "big.npz", folder / "small.npz"
        write_s = write_npz(big, MEMORY_ROWS, MEMORY_FEATURES)
        write_npz(small, small_rows, MEMORY_FEATURES)
        sizes = {path: path.stat().st_size for path in (big, small)}
        steps = {big: -(-MEMORY_ROWS // MEMORY_BATCH), small: -(-small_rows // MEMORY_BATCH)}
        print(
            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
            f"{os.getloadavg()[0]:.1f}: {MEMORY_ROWS:,} x {MEMORY_FEATURES} float32 (big.npz, "
            f"{sizes[big]:,} bytes, written in {write_s:.0f} s) and {small_rows:,} rows "
            f"(small.npz, {sizes[small]:,} bytes), uncompressed; "
            + (f"L = {_mib(limit)}, big.npz is {sizes[big] / limit:.1f} x L; " if limit else "")
            + f"batch {MEMORY_BATCH}, shuffle buffer {MEMORY_BATCH}, dense 1 unit"
        )
        runs = {}
        for name, path, stream, run_limit in (
            ("big streamed", big, True, limit),
            ("big loaded", big, False, limit),
            ("small streamed", small, True, limit),
            ("small loaded", small, False, LOADED_LIMIT if limit else None),
        ):
            if name == "big loaded" and limit is None:
                continue
            runs[name] = engine_run(
                memory_project(path, stream=stream), folder, run_limit, steps[path]
            )
            drop_cached(path)
            if name != "big loaded":
                _require_finished(runs[name], name)
        print("one epoch over big.npz:")
        report_streamed(runs["big streamed"], sizes[big], limit)
        if "big loaded" in runs:
            loaded = runs["big loaded"]
            if loaded.oom_kills:
                outcome = "killed by the OOM killer"
            else:  # distloop's check before loading (engine.memory_check)
                outcome = "refused" if loaded.code else "finished (not expected)"
            print(
                f"  loaded under the same limit: {outcome}, engine RSS peak "
                f"{_mib(loaded.peak_rss)}, the cgroup's peak charge "
                f"{_mib(loaded.max_usage or 0)}; {_died(loaded)}"
            )
        print("one epoch over small.npz (a tenth):")
        report_streamed(runs["small streamed"], sizes[small], limit)
        small_loaded = runs["small loaded"]
        grown = small_loaded.peak_rss - runs["small streamed"].peak_rss
        print(
            f"  loaded (limit {_mib(LOADED_LIMIT)}, to protect the machine): engine RSS peak "
            f"{_mib(small_loaded.peak_rss)}, the cgroup's peak charge "
            f"{_mib(small_loaded.max_usage or 0)}; {grown / sizes[small]:.2f} bytes of memory "
            f"per byte of the file over streaming, so big.npz would need about "
            f"{(runs['small streamed'].peak_rss + grown * 10) / 2**30:.1f} GiB loaded"
        )
        streamed_big, streamed_small = (
            runs["big streamed"].peak_rss,
            runs["small streamed"].peak_rss,
        )
        print(
            f"ratios (engine peak RSS): big streamed / small streamed "
            f"{streamed_big / streamed_small:.3f} (a file 10x larger); big streamed / small "
            f"loaded {streamed_big / small_loaded.peak_rss:.2f} (a file 10x larger, streamed, "
            f"against a tenth of it loaded)"
        )


CSV_WIDE = sized((10_000, 2048), (300, 16))
"""Rows and features of the wide CSV (about 200 MB: 9-10 characters a cell)."""
CSV_NARROW = sized((2_000_000, 10), (3_000, 10))
"""Rows and features of the narrow CSV (about 220 MB)."""
CSV_CLASSES = 10
CSV_BATCH = 256


def write_csv(path: Path, rows: int, features: int) -> int:
    """A CSV of ``rows`` rows: ``features`` values in [0, 1) printed with 7 significant
    digits, then a class label. A block of 1,000 distinct rows is written again and again
    (the parser's work per byte does not depend on repeats; formatting every row would take
    longer than reading it). Returns the file's size."""
    rng = np.random.default_rng(0)
    block = min(rows, 1000)
    table = rng.random((block, features + 1), dtype=np.float32)
    table[:, -1] = rng.integers(0, CSV_CLASSES, block)
    names = [f"f{column}" for column in range(features)] + ["label"]
    lines = [",".join(f"{value:.7g}" for value in row[:-1]) + f",{int(row[-1])}" for row in table]
    text = "\n".join(lines) + "\n"
    with path.open("w") as handle:
        handle.write(",".join(names) + "\n")
        for _ in range(rows // block):
            handle.write(text)
        handle.write("".join(line + "\n" for line in lines[: rows % block]))
    return path.stat().st_size


def csv_project(path: Path, features: int) -> Project:
    return load_project_data(
        {
            "schema_version": 1,
            "model": {
                "input_shape": [features],
                "layers": [{"kind": "dense", "units": CSV_CLASSES}],
            },
            "loss": {"kind": "sparse_categorical_crossentropy", "from_logits": True},
            "data": {
                "source": "csv",
                "path": str(path),
                "label_column": "label",
                "stream": True,
                "global_batch_size": CSV_BATCH,
                "shuffle_buffer": CSV_BATCH * 4,
            },
            "training": {"epochs": 1, "seed": 0},
        }
    )


def old_csv_examples(
    data: CsvData, project: Project, where: str = "data"
) -> tuple[tf.data.Dataset, int]:
    """The streamed CSV pipeline before issue 13's change (commit 6e2a437), as it was."""
    path, field = Path(data.path), f"{where}.path"
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader(handle), [])
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{field}: cannot read {path}: {exc}") from None
    if data.label_column not in header:
        raise DataError(
            f"{where}.label_column: {path} has no column {data.label_column!r} "
            f"(columns: {', '.join(header)})"
        )
    if len(header) - 1 != project.model.input_size:
        raise DataError(
            f"{field}: examples in {path} have {len(header) - 1} feature column(s), but "
            f"model.input_shape {project.model.input_shape} takes {project.model.input_size}"
        )
    rows_dataset = tf.data.experimental.CsvDataset(
        str(path), [tf.float32] * len(header), header=True
    )
    label_at = header.index(data.label_column)
    sparse = project.loss.kind == "sparse_categorical_crossentropy"
    classes = project.model.output_units if project.custom_code is None else None

    def sound(*cells: tf.Tensor) -> tf.Tensor:
        """Every cell finite; for sparse crossentropy, the label a class number in range."""
        ok = tf.reduce_all(tf.math.is_finite(tf.stack(cells)))
        if sparse:
            label = cells[label_at]
            ok = ok & tf.equal(label, tf.round(label)) & (label >= 0)
            ok = ok if classes is None else ok & (label < classes)
        return ok

    finite = rows_dataset.map(sound, num_parallel_calls=tf.data.AUTOTUNE)
    try:  # one pass in TensorFlow's parser: counts the rows and finds a bad one up front
        rows, all_finite = finite.reduce(
            (tf.constant(0, tf.int64), tf.constant(True)),
            lambda state, ok: (state[0] + 1, tf.logical_and(state[1], ok)),
        )
        rows, all_finite = int(rows), bool(all_finite)
    except tf.errors.OpError:
        all_finite = False
    if not all_finite:
        labels = LabelCheck(f"{where}.label_column", str(path), label_at, classes, sparse)
        raise DataError(f"{field}: {path} {first_bad_row(path, header, labels)}")
    if rows == 0:
        raise DataError(f"{field}: {path} has a header but no rows of data")
    shape, label_type = project.model.input_shape, labels_dtype(project)

    def example(*cells: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        values = list(cells)
        label = values.pop(label_at)
        features = tf.reshape(tf.stack(values), shape)
        return features, tf.reshape(tf.cast(label, label_type), (1,))

    return rows_dataset.map(example, num_parallel_calls=tf.data.AUTOTUNE), rows


@contextmanager
def old_csv_pipeline() -> Iterator[None]:
    """``build_training_data`` with the old CSV pipeline in place of the new one."""
    new = csv_source.csv_examples
    csv_source.csv_examples = old_csv_examples
    try:
        yield
    finally:
        csv_source.csv_examples = new


@dataclass(frozen=True)
class CsvTiming:
    """MB/s and process CPU seconds per GB (every thread's: less moved by other load) of the
    check before the run and of one epoch."""

    check_mb_s: float
    epoch_mb_s: float
    check_cpu: float
    epoch_cpu: float


def time_csv(project: Project, size: int) -> CsvTiming:
    """The check before the run (in ``build_training_data``), then one epoch."""
    started, started_cpu = time.perf_counter(), cpu_seconds()
    dataset = build_training_data(project).dataset
    checked, checked_cpu = time.perf_counter(), cpu_seconds()
    for _ in dataset:
        pass
    ended, ended_cpu = time.perf_counter(), cpu_seconds()
    return CsvTiming(
        size / (checked - started) / 1e6,
        size / (ended - checked) / 1e6,
        (checked_cpu - started_cpu) / size * 1e9,
        (ended_cpu - checked_cpu) / size * 1e9,
    )


def same_batches(project: Project) -> int:
    """One epoch of the new and the old pipeline, batch for batch; returns the batch count."""
    new = list(build_training_data(project).dataset)
    with old_csv_pipeline():
        old = list(build_training_data(project).dataset)
    assert len(new) == len(old), "the epochs differ in length"
    for (new_x, new_y), (old_x, old_y) in zip(new, old, strict=True):
        assert new_x.dtype == old_x.dtype and new_y.dtype == old_y.dtype
        np.testing.assert_array_equal(new_x.numpy(), old_x.numpy())
        np.testing.assert_array_equal(new_y.numpy(), old_y.numpy())
    return len(new)


def csv_speed(rounds: int) -> None:
    """New vs old streamed CSV pipeline on wide and narrow rows in paired rounds (the order
    alternating): the new one over the whole file, the old one over its tenth (a pass
    over the whole file takes it minutes; the new one's fixed costs, tracing and the
    file's header, would weigh on a tenth)."""
    print(
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
        f"{os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} cores; batch {CSV_BATCH}, "
        f"shuffle buffer {CSV_BATCH * 4}, {rounds} paired rounds",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="distloop_csv_") as tmp:
        for name, (rows, features) in (("wide", CSV_WIDE), ("narrow", CSV_NARROW)):
            full, tenth = Path(tmp) / f"{name}.csv", Path(tmp) / f"{name}_tenth.csv"
            size = write_csv(full, rows, features)
            tenth_size = write_csv(tenth, rows // 10, features)
            batches = same_batches(csv_project(tenth, features))
            new: list[CsvTiming] = []
            old: list[CsvTiming] = []
            for round_ in range(rounds):
                for pipeline in (old, new) if round_ % 2 else (new, old):
                    if pipeline is new:
                        new.append(time_csv(csv_project(full, features), size))
                    else:
                        with old_csv_pipeline():
                            old.append(time_csv(csv_project(tenth, features), tenth_size))
            full.unlink()
            tenth.unlink()
            print(
                f"{name}: {rows:,} x {features + 1} ({size / 1e6:.0f} MB; its tenth, "
                f"{tenth_size / 1e6:.0f} MB, gave the same {batches} batches new and old), "
                "new over the file, old over its tenth:",
                flush=True,
            )
            for part in ("check", "epoch"):
                rates = [[getattr(t, f"{part}_mb_s") for t in runs] for runs in (new, old)]
                cpu = [[getattr(t, f"{part}_cpu") for t in runs] for runs in (new, old)]
                ratios = [a / b for a, b in zip(*rates, strict=True)]
                print(
                    f"  {part}: new {max(rates[0]):.1f} MB/s best, old "
                    f"{max(rates[1]):.1f} best; median of the rounds' ratios "
                    f"{float(np.median(ratios)):.1f}x (each {', '.join(f'{r:.1f}' for r in ratios)}"
                    f"); CPU s/GB (median) new {float(np.median(cpu[0])):.0f}, old "
                    f"{float(np.median(cpu[1])):.0f} "
                    f"({float(np.median(cpu[1])) / float(np.median(cpu[0])):.1f}x less)",
                    flush=True,
                )
            print(f"  load average {os.getloadavg()[0]:.1f}", flush=True)


MIXING_PER_CLASS = sized(3_000, 200)
"""Files a class in the mixing case: more than its shuffle buffer, as a user's folder has."""
MIXING_BUFFER = sized(2_048, 64)
MIXING_BATCHES = sized(20, 3)


def write_linked_folder(root: Path) -> int:
    """``CLASSES`` x ``MIXING_PER_CLASS`` PNGs in seconds: hard links of 20 noise images a
    class (decoding costs what distinct files cost; the page cache holds them alike)."""
    rng = np.random.default_rng(0)
    for label in range(CLASSES):
        folder = root / f"class_{label}"
        folder.mkdir(parents=True)
        sources = []
        for variant in range(20):
            source = root.parent / f"source-{label}-{variant}.png"
            pixels = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
            source.write_bytes(tf.io.encode_png(pixels).numpy())
            sources.append(source)
        for index in range(MIXING_PER_CLASS):
            os.link(sources[index % len(sources)], folder / f"{index:05d}.png")
    return CLASSES * MIXING_PER_CLASS


def class_mixing(labels: list[np.ndarray]) -> str:
    """How well batches mix the classes: the classes a batch holds and the largest class
    share of a batch (medians), and the furthest any class's share strays from its 10%."""
    classes = [len(np.unique(batch)) for batch in labels]
    largest = [np.bincount(batch, minlength=CLASSES).max() / len(batch) for batch in labels]
    shares = np.bincount(np.concatenate(labels), minlength=CLASSES) / sum(map(len, labels))
    return (
        f"{np.median(classes):.0f} classes a batch, largest class {np.median(largest):.0%} "
        f"of a batch, class shares off by up to {np.abs(shares - 1 / CLASSES).max():.1%}"
    )


def first_labels(dataset: tf.data.Dataset) -> list[np.ndarray]:
    return [labels.numpy() for _, labels in dataset.take(MIXING_BATCHES)]


def epoch_sums(dataset: tf.data.Dataset, scale: float) -> np.ndarray:
    """Each image's pixel sum over one epoch, sorted: the epoch's images, like for like."""
    sums = [batch.numpy().reshape(len(batch), -1).sum(axis=1) * scale for batch, _ in dataset]
    return np.sort(np.concatenate(sums))


def mixing(rounds: int) -> None:
    """A folder larger than the shuffle buffer (10 classes of 3,000 files, buffer 2,048):
    the first batches' class mixing of Distloop's pipeline, of Keras's (which shuffles
    its whole file list), and of the shuffle Distloop made before (a buffer of 2,048 names
    over the class-sorted list, its labels alone), then one epoch's images/s of each."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        total = write_linked_folder(root)
        ours, keras = distloop_dataset(root, MIXING_BUFFER), keras_dataset(root)
        same = epoch_sums(ours, 255.0), epoch_sums(keras, 1.0)
        np.testing.assert_allclose(*same, rtol=1e-5)  # the same images, one epoch each
        sorted_labels = np.repeat(np.arange(CLASSES, dtype=np.int32), MIXING_PER_CLASS)
        before = (
            tf.data.Dataset.from_tensor_slices((sorted_labels, sorted_labels))
            .shuffle(MIXING_BUFFER, seed=0)
            .batch(BATCH)
        )
        ours_rates: list[float] = []
        keras_rates: list[float] = []
        ours_cpu: list[float] = []
        keras_cpu: list[float] = []
        for round_ in range(rounds):  # paired rounds, the order alternating
            pair = [(ours, ours_rates, ours_cpu), (keras, keras_rates, keras_cpu)]
            for dataset, rates, cpu in pair[:: -1 if round_ % 2 else 1]:
                timed_epoch(dataset, rates, cpu, total)
        print(
            f"folder larger than the shuffle buffer ({total} PNGs, {CLASSES} classes of "
            f"{MIXING_PER_CLASS}, buffer {MIXING_BUFFER}, batch {BATCH}), first "
            f"{MIXING_BATCHES} batches: distloop {class_mixing(first_labels(ours))}; "
            f"image_dataset_from_directory {class_mixing(first_labels(keras))}; distloop "
            f"before (a buffer of names) {class_mixing(first_labels(before))}. One epoch, "
            f"{rounds} paired rounds: distloop {max(ours_rates):,.0f} images/s best, "
            f"image_dataset_from_directory {max(keras_rates):,.0f}, median of the rounds' "
            f"ratios {float(np.median(np.divide(ours_rates, keras_rates))):.2f}; CPU per "
            f"image (median) {np.median(ours_cpu):.0f} / {np.median(keras_cpu):.0f} µs; load "
            f"average {os.getloadavg()[0]:.1f}",
            flush=True,
        )


def main(rounds: int, file_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "images"
        total = write_folder(root, file_size)
        started = time.perf_counter()
        ours = distloop_dataset(root)  # lists, checks and test-decodes every file once
        checked = time.perf_counter() - started
        keras = keras_dataset(root)
        check_like_for_like(ours, keras)
        images_per_second(ours.take(2))  # first-iteration tracing out of the timing
        images_per_second(keras.take(2))
        ours_rates: list[float] = []
        keras_rates: list[float] = []
        ours_cpu: list[float] = []
        keras_cpu: list[float] = []
        for round_ in range(rounds):  # paired rounds, the order alternating
            if round_ % 2:
                timed_epoch(keras, keras_rates, keras_cpu, total)
                timed_epoch(ours, ours_rates, ours_cpu, total)
            else:
                timed_epoch(ours, ours_rates, ours_cpu, total)
                timed_epoch(keras, keras_rates, keras_cpu, total)
        ratios = [a / b for a, b in zip(ours_rates, keras_rates, strict=True)]
        print(
            f"image folder ({total} PNGs {file_size}x{file_size} RGB to {SIZE}x{SIZE}, batch "
            f"{BATCH}, {rounds} rounds): "
            f"distloop {max(ours_rates):,.0f} images/s best, image_dataset_from_directory "
            f"{max(keras_rates):,.0f} images/s best, ratio of the bests "
            f"{max(ours_rates) / max(keras_rates):.2f}, median of the rounds' ratios "
            f"{float(np.median(ratios)):.2f}; CPU time per image (median) distloop "
            f"{float(np.median(ours_cpu)):.0f} µs, image_dataset_from_directory "
            f"{float(np.median(keras_cpu)):.0f} µs; the "
            f"run-start check of every file took {checked:.2f} s"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["memory"]:
        memory()
    elif sys.argv[1:2] == ["mixing"]:
        mixing(int(sys.argv[2]) if len(sys.argv) > 2 else sized(3, 1))
    elif sys.argv[1:2] == ["csv"]:
        csv_speed(int(sys.argv[2]) if len(sys.argv) > 2 else sized(3, 1))
    else:
        main(
            int(sys.argv[1]) if len(sys.argv) > 1 else sized(5, 1),
            RESIZED_FROM if "resized" in sys.argv[2:] else SIZE,
        )
