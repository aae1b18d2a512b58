"""TF_CONFIG rules: what TensorFlow enforces and what it only finds out by hanging."""

from __future__ import annotations

import json

import pytest
from distloop.engine.problems import ProblemsError
from distloop.engine.tf_config import (
    TFConfig,
    parse_address,
    parse_tf_config_text,
    strategy_problems,
)


def problems(text: str) -> dict[str, str]:
    with pytest.raises(ProblemsError) as caught:
        parse_tf_config_text(text)
    return {p.path: p.message for p in caught.value.problems}


def test_guide_example_parses() -> None:
    config = parse_tf_config_text(
        '{"cluster": {"worker": ["host1:2222", "host2:2222", "host3:2222"],'
        ' "ps": ["host4:2222", "host5:2222"]}, "task": {"type": "worker", "index": 1}}'
    )
    assert str(config.task) == "worker:1"
    assert [str(t) for t in config.tasks()][:3] == ["worker:0", "worker:1", "worker:2"]
    assert strategy_problems(config, "parameter_server")[0].message.startswith(
        "parameter_server needs a chief"
    )


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("host", "no port"),
        ("host:0", "outside 1-65535"),
        ("host:70000", "outside 1-65535"),
        ("host:http", "not a number"),
        ("ho st:22", "not a valid host"),
        ("-bad:22", "not a valid host"),
        ("300.1.1.1:22", "not a valid host"),
        ("::1:22", "brackets"),
        ("[zz]:22", "not an IPv6"),
        (":22", "no host"),
    ],
)
def test_bad_addresses_say_why(address: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_address(address)


@pytest.mark.parametrize("address", ["localhost:2222", "10.0.0.1:1", "[::1]:65535", "a-b.c:80"])
def test_good_addresses(address: str) -> None:
    parse_address(address)


def test_master_gets_a_rename_hint() -> None:
    found = problems(
        '{"cluster": {"master": ["h:1"], "worker": ["h:2"]}, "task": {"type": "worker"}}'
    )
    assert "rename it" in found["cluster.master"]


def test_one_chief_one_evaluator_and_unique_addresses() -> None:
    found = problems(
        '{"cluster": {"chief": ["a:1", "b:1"], "evaluator": ["c:1", "d:1"], "worker": ["a:1"]},'
        ' "task": {"type": "chief", "index": 0}}'
    )
    assert "at most one chief" in found["cluster.chief"]
    assert "at most one evaluator" in found["cluster.evaluator"]
    assert "also chief:0" in found["cluster.worker.0"]


def test_task_must_be_in_the_cluster() -> None:
    found = problems('{"cluster": {"worker": ["a:1"]}, "task": {"type": "ps", "index": 0}}')
    assert "no such job" in found["task.type"]


def test_malformed_json_and_non_objects() -> None:
    assert "not valid JSON" in problems("{cluster:")[""]
    assert "JSON object" in problems("[1, 2]")[""]


def test_env_string_round_trips() -> None:
    config = TFConfig.model_validate(
        {"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}
    )
    assert parse_tf_config_text(config.to_env()) == config
    assert config.for_task("worker", 0).task.index == 0


@pytest.mark.parametrize(
    ("address", "fragment"),
    [
        ("host:02222", "leading zero"),
        ("host:٢٢٢٢", "not a number"),  # Arabic-Indic digits: str.isdigit() says yes
        ("host:２２２２", "not a number"),  # fullwidth digits
        ("host:+22", "not a number"),
    ],
)
def test_ports_are_plain_ascii_decimal(address: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_address(address)


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("localhost:2222", "127.0.0.1:2222"),
        ("LocalHost:2222", "localhost:2222"),
        ("[::1]:2222", "localhost:2222"),
        ("127.0.0.2:2222", "localhost:2222"),
        ("Host1.example.com:2222", "host1.example.com.:2222"),
        ("[::ffff:10.0.0.1]:1", "10.0.0.1:1"),
    ],
)
def test_one_address_spelt_two_ways_is_a_duplicate(first: str, second: str) -> None:
    found = problems(
        json.dumps({"cluster": {"chief": [first], "worker": [second]}, "task": {"type": "chief"}})
    )
    assert "also chief:0" in found["cluster.worker.0"]


def test_task_index_is_a_strict_integer_and_keys_get_suggestions() -> None:
    found = problems('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": true}}')
    assert "valid integer, not true" in found["task.index"]
    found = problems('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "indx": 0}}')
    assert "did you mean 'index'?" in found["task.indx"]


def test_tf_config_json_errors_and_byte_order_mark() -> None:
    assert problems('{"cluster": }')[""] == "line 1, column 13: not valid JSON: Expecting value"
    text = '\ufeff{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker"}}'
    assert parse_tf_config_text(text).task.type == "worker"
