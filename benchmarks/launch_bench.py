"""Click to first step on SSH hosts vs the same cluster on this machine (root, Linux).

``python -m benchmarks.launch_bench [ROUNDS]``: for 2 and 3 workers, each round times
``distloop cluster`` (every task here, in its private network) and ``distloop launch``
onto as many hosts (network namespaces on a bridge, each with its own sshd: the test
suite's hosts) from the command's start to its first ``step=`` line, with and
without the pre-flight, in paired rounds; prints the medians and ratios. The hosts
share this machine's cores and disk, so what SSH adds is measured, not a network's
latency.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from support.distloop_testing import synthetic_project  # noqa: E402
from support.ssh_hosts import SshHosts, ssh_hosts, unavailable_reason  # noqa: E402

from benchmarks.quick import sized  # noqa: E402

CLI = [sys.executable, "-m", "distloop.gui.launcher"]


def _project(folder: Path, addresses: list[str]) -> Path:
    data = synthetic_project(1, steps=sized(200, 20))
    data["strategy"] = {"kind": "multi_worker_mirrored"}
    data["tf_config"] = {
        "cluster": {"worker": [f"{address}:2222" for address in addresses]},
        "task": {"type": "worker"},
    }
    path = folder / "project.json"
    path.write_text(json.dumps(data))
    return path


def _first_step_s(command: list[str]) -> float:
    started = time.monotonic()
    process = subprocess.Popen(
        command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    assert process.stdout is not None
    try:
        for line in process.stdout:
            if line.startswith("step="):
                return time.monotonic() - started
        raise RuntimeError(f"no step from {command[3]}: exit code {process.wait()}")
    finally:
        process.terminate()
        process.wait()


def _round(hosts: SshHosts, count: int, folder: Path, index: int) -> dict[str, float]:
    project = _project(folder, hosts.addresses[:count])
    launch = [
        *CLI, "launch", str(project), "--ssh-config", str(hosts.ssh_config),
        "--remote-command", " ".join(CLI), "--remote-dir", str(folder / "remote"),
    ]  # fmt: skip
    return {
        "local": _first_step_s(
            [*CLI, "cluster", str(project), "--out", str(folder / f"local{index}")]
        ),
        "ssh": _first_step_s([*launch, "--out", str(folder / f"ssh{index}"), "--no-preflight"]),
        "ssh+preflight": _first_step_s([*launch, "--out", str(folder / f"pre{index}")]),
    }


def main(rounds: int) -> None:
    reason = unavailable_reason()
    if reason:
        raise SystemExit(f"launch_bench: {reason}")
    counts = sized((2, 3), (2,))
    with (
        tempfile.TemporaryDirectory(prefix="launch-bench-") as tmp,
        ssh_hosts(Path(tmp) / "hosts", max(counts)) as hosts,
    ):
        for count in counts:
            times: dict[str, list[float]] = {}
            for index in range(rounds):
                folder = Path(tmp) / f"w{count}r{index}"
                folder.mkdir()
                for what, seconds in _round(hosts, count, folder, index).items():
                    times.setdefault(what, []).append(seconds)
            local = statistics.median(times["local"])
            for what, values in times.items():
                median = statistics.median(values)
                print(
                    f"{count} workers, {what:14} first step after {median:5.1f} s "
                    f"(median of {rounds}; {min(values):.1f}-{max(values):.1f}), "
                    f"{median / local:.2f}x local",
                    flush=True,
                )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else sized(3, 1))
