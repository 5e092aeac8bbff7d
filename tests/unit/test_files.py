"""canary.files: spec-like files and observation lines read within bounds (issue 35, item 5)."""

from __future__ import annotations

import io
import json
import os

import pytest
import yaml

from canary.files import MAX_SPEC_BYTES, InputFileError, bounded_lines, parse_spec, read_limited, shown
from canary.forms import BROKER_FORM, FormError
from canary.observations import MAX_RECORD_BYTES, ObservationsFileError, read_file_counted
from canary.rollout.broker.spec import load_spec
from canary.rollout.core.spec import SpecError

GOOD = {"cluster": {"dir": "/c"}, "change": {"config": {"num.io.threads": "6"}}, "canary": {"count": 1}}


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom"])
def test_a_device_is_refused_without_reading_it(path):
    with pytest.raises(InputFileError, match="not a regular file"):
        read_limited(path)


def test_a_fifo_and_a_directory_are_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "fifo")  # nobody writes: an open that waits would hang the test
    with pytest.raises(InputFileError, match="device, pipe or socket"):
        read_limited(tmp_path / "fifo")
    with pytest.raises(InputFileError, match="is a directory"):
        read_limited(tmp_path)


def test_a_file_over_the_limit_is_refused_and_one_at_it_read(tmp_path):
    big = tmp_path / "big.yaml"
    with open(big, "wb") as f:
        f.truncate(50 * 1024 * 1024)
    with pytest.raises(InputFileError, match="larger than 1 MiB"):
        read_limited(big)
    exact = tmp_path / "exact.yaml"
    exact.write_text("a" * MAX_SPEC_BYTES)
    assert len(read_limited(exact)) == MAX_SPEC_BYTES


def test_aliases_are_refused_before_anything_expands():
    bomb = "a: &a [lol, lol, lol]\nb: &b [*a, *a, *a]\nc: [*b, *b, *b]\n"
    with pytest.raises(yaml.YAMLError, match=r"alias \(\*a\) is not allowed"):
        parse_spec(bomb)


@pytest.mark.parametrize("text", ["a: 1\nb: 2\na: 3\n", '{"a": 1, "a": 2}', "x: {a: 1, a: 1}"])
def test_duplicate_keys_are_refused_naming_the_key(text):
    with pytest.raises(yaml.YAMLError, match="duplicate key 'a'"):
        parse_spec(text)


def test_json_exponents_are_numbers_and_quoted_ones_text():
    assert parse_spec('{"a": 1e2, "b": -1.5E-3, "c": "1e2", "d": 4.1.2, "e": 1.0, "f": 7}') == {
        "a": 100.0, "b": -0.0015, "c": "1e2", "d": "4.1.2", "e": 1.0, "f": 7}


def test_deep_nesting_is_a_parse_error_not_a_crash():
    with pytest.raises(yaml.YAMLError, match="nested too deeply"):
        parse_spec("[" * 100_000)


def test_shown_is_bounded_for_huge_and_self_sharing_values():
    shared: list = ["lol"] * 9
    for _ in range(30):  # 9**30 items if expanded
        shared = [shared] * 9
    assert len(shown(shared)) <= 200
    assert len(shown("x" * 1_000_000)) <= 200


def test_a_spec_reads_exponents_as_numbers(tmp_path):
    path = tmp_path / "rollout.json"
    path.write_text(json.dumps(GOOD)[:-1] + ', "probe": {"rate": 1e2, "window": 3e2}}')
    spec = load_spec(path)
    assert (spec.probe.rate, spec.probe.window) == (100.0, 300.0)


def test_spec_errors_echo_a_bounded_amount(tmp_path):
    with pytest.raises(SpecError) as refused:
        load_spec({**GOOD, "run_id": "x" * 1_000_000, "probe": {"window": ["w"] * 100_000}})
    assert len(str(refused.value)) < 1000
    many = {**GOOD, **{f"unknown_{n}": n for n in range(500)}}
    with pytest.raises(SpecError) as refused:
        load_spec(many)
    assert "… and 480 more problem(s)" in str(refused.value) and len(str(refused.value).splitlines()) == 22


@pytest.mark.parametrize("conn_id", ["../../variables", "a/b", ".hidden", "x" * 251])
def test_a_connection_id_is_no_path(conn_id):
    with pytest.raises(FormError, match="is not an Airflow connection id"):
        BROKER_FORM.check({"cluster_conn_id": conn_id, "target_version": "4.1.2"})
    BROKER_FORM.check({"cluster_conn_id": "prod-eu.kafka_1", "target_version": "4.1.2"})


def test_lines_are_held_bounded_whatever_the_file_holds():
    data = b"a" * (10 * 1024 * 1024) + b"\nshort\n" + b"b" * 100
    lines = list(bounded_lines(io.BytesIO(data), 1024))
    assert [len(line) for line in lines] == [1025, 6, 100]


def test_observations_a_device_is_refused_and_an_endless_line_is_oversize(tmp_path):
    with pytest.raises(ObservationsFileError, match="/dev/zero: is a device"):
        read_file_counted("/dev/zero")
    path = tmp_path / "obs.jsonl"
    path.write_bytes(b"{" + b"x" * (5 * MAX_RECORD_BYTES) + b"\n" + b"[1]\n" + b"y" * (3 * MAX_RECORD_BYTES))
    records, bad = read_file_counted(path)
    assert records == [] and bad == {"oversize": 2, "malformed": 1}
