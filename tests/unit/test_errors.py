"""A file's parse error reads as one line, naming where."""

import pytest
import yaml

from canary.errors import one_line


def test_a_yaml_error_is_one_line_with_line_and_column():
    with pytest.raises(yaml.YAMLError) as raised:
        yaml.safe_load("cluster: ok\nchange: [unclosed\n")
    assert one_line(raised.value) == "line 3, column 1: expected ',' or ']', but got '<stream end>'"


def test_other_errors_keep_their_first_line():
    assert one_line(OSError(2, "No such file or directory")) == "[Errno 2] No such file or directory"
    assert one_line(ValueError("first\nsecond")) == "first"
    assert one_line(TimeoutError()) == "TimeoutError"
