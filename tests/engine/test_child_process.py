"""The one way a child process is started and read (engine.child_process): spawned, never
forked; typed requests one way and typed messages the other; anything else refused; a
descriptor handed over held by the child; and nothing left running after close."""

from __future__ import annotations

import os
import queue
import signal
import sys
import time
from pathlib import Path

import pytest
from distloop.engine.channel import Channel
from distloop.engine.child_main import engine_main
from distloop.engine.child_process import ChildEnds, ChildProcess, describe_exit
from distloop.engine.devices import Device, detect_devices
from distloop.engine.messages import (
    EngineJob,
    Log,
    PredictionDone,
    PredictRequest,
    ProtocolError,
    RunFailed,
)

SET_BY_THE_PARENT = "as imported"
"""A forked child would see the parent's later change of it; a spawned one imports afresh."""


def echo_main(ends: ChildEnds, greeting: str) -> None:
    """Says what it sees of its parent's module state, then echoes each request's rows."""
    channel = Channel(ends.out, None, None)
    channel.send(Log(text=f"{greeting}: {SET_BY_THE_PARENT}"))
    while True:
        try:
            request = ends.receive()
        except EOFError:
            break
        assert isinstance(request, PredictRequest)
        channel.send(Log(text=",".join(request.rows)))
    channel.send(PredictionDone())
    channel.close()


def plain_dict_main(ends: ChildEnds) -> None:
    """What a failing prediction process once sent: a dict that is no protocol message."""
    ends.out.put({"error": "boom"})
    ends.out.close()
    ends.out.join_thread()


def descriptor_main(ends: ChildEnds) -> None:
    """Writes through the descriptor that follows its job: the parent's open file."""
    job = ends.receive()
    assert isinstance(job, EngineJob) and job.lock_follows
    fd = ends.receive_handle()
    os.write(fd, f"held by {os.getpid()}\n".encode())
    os.close(fd)


def sleep_main(ends: ChildEnds) -> None:
    """A child that never ends on its own, even when asked (SIGTERM ignored)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(60)


def test_a_spawned_child_reads_typed_requests_and_its_messages_arrive_typed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "SET_BY_THE_PARENT", "changed in the parent")
    child = ChildProcess(echo_main, "hello", name="distloop-test-echo")
    try:
        first = child.receive(60)
        assert first == Log(text="hello: as imported")  # spawned: nothing of the parent's state
        child.send(PredictRequest(rows=["1,2", "3"]))
        assert child.receive(60) == Log(text="1,2,3")
        child.close_requests()
        assert isinstance(child.receive(60), PredictionDone)
        child.join(60)
        assert child.exitcode == 0 and not child.is_alive()
    finally:
        child.close()
    assert child.exitcode == 0


def test_what_is_not_a_protocol_message_is_refused() -> None:
    child = ChildProcess(plain_dict_main, name="distloop-test-plain")
    try:
        with pytest.raises(ProtocolError, match="engine speaks protocol None"):
            child.receive(60)
    finally:
        child.close(wait_s=30)


def test_a_descriptor_sent_after_a_job_is_the_child_s_own(tmp_path: Path) -> None:
    path = tmp_path / "held"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    child = ChildProcess(descriptor_main, name="distloop-test-descriptor")
    try:
        child.send(EngineJob(project_json="{}", lock_follows=True))
        child.send_handle(fd)
        child.close_requests()
        os.close(fd)  # the child's copy stays open without the parent's
        child.join(60)
        assert child.exitcode == 0
    finally:
        child.close()
    assert path.read_text() == f"held by {child.pid}\n"


def test_close_ends_a_child_that_would_not_end_and_every_end_with_it() -> None:
    child = ChildProcess(sleep_main, name="distloop-test-sleeper")
    with pytest.raises(queue.Empty):
        child.receive(0.5)
    with pytest.raises(queue.Empty):  # a negative wait is no wait, not a wait for ever
        child.receive(-1.0)
    child.close()
    assert not child.is_alive() and child.exitcode == -signal.SIGKILL
    assert describe_exit(child.exitcode, "the child") == (
        "the child was killed by SIGKILL (the system also does this when memory runs out)"
    )
    with pytest.raises(EOFError):  # its queue is closed: not taken for a bad message
        child.receive(0.1)
    with pytest.raises(OSError):
        child.send(PredictRequest())


@pytest.mark.slow
def test_the_device_probe_is_a_child_like_the_others() -> None:
    found = detect_devices()  # its answer, handed on as a plain value
    assert found.tensorflow_version
    assert any(device == Device(device.name, "CPU") for device in found.devices)


def test_an_engine_sent_anything_but_a_job_fails_in_one_line() -> None:
    child = ChildProcess(engine_main, False, name="distloop-test-engine")
    try:
        child.send(PredictRequest(rows=["1"]))
        failed = child.receive(60)
        assert isinstance(failed, RunFailed) and failed.error_type == "ProtocolError"
        assert failed.message == "an engine takes a job, not predict_request"
        child.join(60)
        assert child.exitcode == 1
    finally:
        child.close()
