"""What a host says reaches this terminal and log only as printable text: a task's
messages and its channel's own output come from a machine that may be anyone's, through
a real process standing in for the ssh channel."""

from __future__ import annotations

import json
import sys
import time

from distloop.engine.cluster.remote import RemoteEngine
from distloop.engine.messages import Log, Message, RunFailed
from distloop.engine.project_file import load_project_data
from support.clusters import multi_worker

HOSTILE = "\x1b[2J\x1b[Hdistloop: all fine\u202e\r"


def test_a_host_s_escapes_and_endless_lines_reach_the_notices_escaped_and_cut() -> None:
    text = f"step 3\n{HOSTILE}"
    log = Log(level="warning", text=text, task="worker:0").model_dump(mode="json")
    script = (
        "import sys\n"
        f"print({json.dumps(json.dumps(log))}, flush=True)\n"
        f"sys.stderr.write({HOSTILE!r} + 'x' * 5_000_000)\n"
        "sys.stderr.flush()\n"
        "sys.exit(3)\n"
    )
    project = load_project_data(multi_worker(20))
    engine = RemoteEngine(
        project, [sys.executable, "-c", script], task="worker:0", where="worker:0 on h1"
    )
    engine.start()
    messages: list[Message] = []
    deadline = time.monotonic() + 120
    while not any(isinstance(m, RunFailed) for m in messages) and time.monotonic() < deadline:
        messages += engine.poll(1.0)
    engine.close()
    [said] = [m for m in messages if isinstance(m, Log)]
    assert said.text == "step 3\n\\x1b[2J\\x1b[Hdistloop: all fine\\u202e\\r"
    [failed] = [m for m in messages if isinstance(m, RunFailed)]
    assert failed.message.isprintable()
    assert "\\x1b[2J\\x1b[Hdistloop: all fine\\u202e" in failed.message
    assert len(failed.message) < 3000  # the 5 MB line cut
