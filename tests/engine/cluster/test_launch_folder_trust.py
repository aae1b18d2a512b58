"""A launch's run folder from someone else: ``distloop launch --resume`` and ``cluster
--dump`` read its ssh configuration, host commands, remote folder and run name from its
``status.json``. They are checked as strictly as the project's ``launch`` section, printed
escaped, and what they run beyond Distloop runs only for this user's own folders (sealed
by the launch that made them) or with ``--trust-launch``. Real ``distloop`` processes and
a real ssh whose ProxyCommand would write a file here."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from distloop.engine.cluster.launch_trust import seal
from distloop.engine.cluster.ssh import SshLaunch
from distloop.engine.problems import ProblemsError
from distloop.engine.project_file import load_project_data
from support.clusters import multi_worker
from support.distloop_testing import distloop

CLUSTER = {"worker": ["h1.example:2222", "h2.example:2222"]}


def _env(tmp_path: Path) -> dict[str, str]:
    """The user's data folder (where the seal's key is) inside the test's folder."""
    return {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}


def _launch_folder(tmp_path: Path, **launch: object) -> Path:
    """A stopped launch's folder as another user could hand it over."""
    run_dir = tmp_path / "their-run"
    (run_dir / "tasks").mkdir(parents=True)
    project = multi_worker(20, {"cluster": CLUSTER, "task": {"type": "worker"}})
    (run_dir / "project.json").write_text(json.dumps(project))
    status = {"status": "stopped", "launch": {"run_name": "their-run", **launch}}
    (run_dir / "status.json").write_text(json.dumps(status))
    return run_dir


def _proxy_config(tmp_path: Path) -> tuple[Path, Path]:
    """An ssh configuration whose ProxyCommand writes a file here (then fails)."""
    written = tmp_path / "proxy-command-ran"
    config = tmp_path / "ssh_config"
    config.write_text(f"Host *\n  ProxyCommand sh -c 'touch {written}; exit 1'\n")
    return config, written


def test_a_crafted_folder_s_proxy_command_runs_only_with_trust_launch(tmp_path: Path) -> None:
    """Said, not run: the one line says how to run it; with --trust-launch it runs."""
    config, written = _proxy_config(tmp_path)
    run_dir = _launch_folder(tmp_path, ssh_config=str(config))
    done = distloop("launch", "--resume", str(run_dir), env=_env(tmp_path), timeout_s=120)
    assert done.returncode == 1, done.stderr
    assert not written.exists()
    assert done.stderr.splitlines() == [
        f"distloop: ssh reads {config}: a ProxyCommand or LocalCommand there runs here",
        f"distloop: {run_dir} was launched by another user, on another machine or edited "
        "since, and runs what is said above: add --trust-launch to run it",
    ]
    assert json.loads((run_dir / "status.json").read_text())["status"] == "stopped"
    dump = distloop("cluster", "--dump", str(run_dir), env=_env(tmp_path), timeout_s=120)
    assert dump.returncode == 1 and not written.exists()

    trusted = distloop(
        "launch", "--resume", str(run_dir), "--trust-launch", env=_env(tmp_path), timeout_s=240
    )
    assert trusted.returncode == 1
    assert written.exists()
    assert "Traceback" not in trusted.stderr


def test_this_user_s_own_launch_folder_resumes_without_asking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seal a launch wrote with this user's key (its data folder): no flag needed."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    config, written = _proxy_config(tmp_path)
    own = seal([f"ssh reads {config}: a ProxyCommand or LocalCommand there runs here"])
    assert (
        own is not None
        and (tmp_path / "data" / "distloop" / "launch-key").stat().st_mode & 0o077 == 0
    )
    run_dir = _launch_folder(tmp_path, ssh_config=str(config), seal=own)
    done = distloop("launch", "--resume", str(run_dir), env=_env(tmp_path), timeout_s=240)
    assert written.exists(), done.stderr
    assert "--trust-launch" not in done.stderr and "Traceback" not in done.stderr
    other = _env(tmp_path) | {"XDG_DATA_HOME": str(tmp_path / "another-user")}
    written.unlink()
    again = distloop("launch", "--resume", str(run_dir), env=other, timeout_s=120)
    assert again.returncode == 1 and not written.exists()
    assert again.stderr.splitlines()[-1].endswith("add --trust-launch to run it")


REFUSED = {
    "run_name": ("../../../../tmp/evil", "is not a plain folder name"),
    "remote_command": ("distloop\x1b[2K\r\x1b[1Adistloop: all fine", "printable characters"),
    "remote_dir": ("runs\u202e", "printable characters"),
    "ssh_config": ("/tmp/config\nHost *", "printable characters"),
}


@pytest.mark.parametrize("key", sorted(REFUSED))
def test_a_crafted_folder_s_settings_are_refused_in_one_escaped_line(
    key: str, tmp_path: Path
) -> None:
    value, reason = REFUSED[key]
    run_dir = _launch_folder(tmp_path, **{key: value})
    done = distloop("launch", "--resume", str(run_dir), env=_env(tmp_path), timeout_s=120)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith(f"distloop: {run_dir}/status.json cannot be used: launch.{key}: ")
    assert reason in line
    assert line.isprintable()


def test_a_destination_s_ipv6_zone_is_an_interface_name() -> None:
    """The zone after % was taken whole: spaces, $(), backticks, ;, ESC and bidi marks
    reached the notices and ssh. A project's command may hold no bidi mark either."""
    project = multi_worker(
        20, {"cluster": {"worker": ["[fe80::1]:2222"]}, "task": {"type": "worker"}}
    )
    for zone in ("eth0 x", "eth0$(touch x)", "eth0`id`", "eth0;id", "eth0\x1b[2J", "eth0\u202e"):
        project["launch"] = {"hosts": {"fe80::1": {"destination": f"root@fe80::1%{zone}"}}}
        with pytest.raises(ProblemsError) as refused:
            load_project_data(project)
        assert "the zone after % must be an interface name" in str(refused.value)
        assert str(refused.value).isprintable() or "\n" in str(refused.value)
        assert "\x1b" not in str(refused.value) and "\u202e" not in str(refused.value)
    project["launch"] = {"hosts": {"fe80::1": {"destination": "root@fe80::1%eth0"}}}
    assert load_project_data(project).launch is not None
    project["launch"] = {"hosts": {"fe80::1": {"command": "distloop\u202e --evil"}}}
    with pytest.raises(ProblemsError, match="printable characters"):
        load_project_data(project)


def test_what_a_launch_runs_is_said_with_every_unprintable_character_escaped() -> None:
    """Notices print an ssh configuration's path, whatever it holds, on one visible line."""
    project = load_project_data(multi_worker(20, {"cluster": CLUSTER, "task": {"type": "worker"}}))
    launch = SshLaunch(run_name="r", ssh_config=Path("/tmp/a\u202eb\x1b[2K\nc"))
    assert launch.unusual(project) == [
        "ssh reads /tmp/a\\u202eb\\x1b[2K\\nc: a ProxyCommand or LocalCommand there runs here"
    ]
