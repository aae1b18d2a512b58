"""The queue's rules without Qt or an engine: which item runs next, how an ended run is
recorded, and what stops the queue (the window's queue drives these: tests/gui)."""

from __future__ import annotations

from typing import Literal

import pytest
from distloop.engine.examples import load_example
from distloop.engine.run_events import RunFailure, RunOutcome
from distloop.engine.run_queue import ItemState, QueueOrder, ended_state


def _finished(status: Literal["finished", "stopped"] = "finished") -> RunOutcome:
    return RunOutcome(status, last_step=3, final_loss=0.5, elapsed_s=1.0)


def _failed(error_type: str, message: str) -> RunOutcome:
    return RunOutcome("failed", None, failure=RunFailure(error_type, message))


def _order(count: int) -> QueueOrder:
    seed = load_example("seed")
    order = QueueOrder()
    order.add([seed.model_copy(update={"name": f"run {n}"}) for n in range(count)])
    return order


@pytest.mark.parametrize(
    ("outcome", "stopped_by_user", "expected"),
    [
        (_finished(), False, (ItemState.FINISHED, None)),
        (_finished(), True, (ItemState.FINISHED, None)),  # it finished before the stop landed
        (_finished("stopped"), False, (ItemState.STOPPED, None)),
        (None, True, (ItemState.STOPPED, None)),
        (
            _failed("DataError", "diverged"),
            False,
            (ItemState.FAILED, "DataError: diverged"),
        ),
        (None, False, (ItemState.FAILED, "the run ended without reporting how")),
    ],
)
def test_how_an_ended_run_is_recorded(outcome, stopped_by_user, expected) -> None:
    assert ended_state(outcome, stopped_by_user) == expected


def test_items_run_in_order_a_failure_goes_on_and_a_stop_ends_the_queue() -> None:
    order = _order(3)
    order.start()
    assert order.running
    first = order.begin_next()
    assert first is order.current and first.number == 1 and first.state is ItemState.RUNNING
    order.remove(order.items)  # the running item stays
    assert order.items == [first]
    order.add([first.project, first.project])
    assert order.end_current(_failed("E", "m"), False) is first
    assert order.running and order.current is None  # a failure does not end the queue
    second = order.begin_next()
    assert second is not None and second.number == 4
    order.end_current(None, stopped_by_user=True)
    assert second.state is ItemState.STOPPED and not order.running
    assert [item.state for item in order.queued()] == [ItemState.QUEUED]
    order.clear_ended()
    assert [item.number for item in order.items] == [5]


def test_a_declined_item_waits_again_and_an_empty_queue_stops() -> None:
    order = _order(1)
    order.start()
    item = order.begin_next()
    order.decline_current()
    assert item is not None and item.state is ItemState.QUEUED and not order.running
    order.start()
    order.begin_next()
    order.end_current(_finished(), False)
    assert order.running and order.begin_next() is None and not order.running
    order.start()
    assert not order.running  # nothing waits
