"""The suite's own scheduling: what pyproject's ``--dist loadgroup`` promises holds with the
pytest and pytest-xdist this checkout installs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

GROUPED = """
import pytest

pytestmark = pytest.mark.xdist_group("deb")


@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    pass


@pytest.mark.parametrize("i", range(4))
def test_free(i):
    pass
"""


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    """The .deb's build, lintian and both installs share one worker (``xdist_group("deb")``):
    split, the second worker waits for the first's build and the two installs contend.
    pytest 9.2 broke this silently (pytest-dev/pytest-xdist#1386), and a CI run showed it."""
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2", "--dist",
         "loadgroup", "-v", "-c", "/dev/null", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]
    workers = re.findall(r"\[(gw\d)\] .*PASSED .*test_grouped\[", result.stdout)
    assert len(workers) == 4, result.stdout[-2000:]
    assert len(set(workers)) == 1, result.stdout[-2000:]
