import pytest

from canary import cli, cluster_cli
from canary.errors import CanaryError


def test_key_values_parse_and_unset():
    assert cluster_cli._key_values(["a=1", "b=x=y"]) == {"a": "1", "b": "x=y"}
    assert cluster_cli._config_changes(["a=1", "b="]) == {"a": "1", "b": None}
    with pytest.raises(CanaryError, match="has no value"):
        cluster_cli._key_values(["a="])


@pytest.mark.parametrize("bad", ["novalue", "=1"])
def test_key_values_refuse_malformed(bad):
    with pytest.raises(CanaryError, match="key=value"):
        cluster_cli._key_values([bad])


def test_broker_versions_and_feature_levels():
    assert cluster_cli._broker_versions(["2=4.1.2"]) == {2: "4.1.2"}
    assert cluster_cli._feature_levels(["metadata.version=27"]) == {"metadata.version": 27}
    with pytest.raises(CanaryError, match="ID=VERSION"):
        cluster_cli._broker_versions(["two=4.1.2"])
    with pytest.raises(CanaryError, match="name=level"):
        cluster_cli._feature_levels(["metadata.version=high"])


def test_canary_errors_exit_2_with_one_line(capsys, tmp_path):
    assert cli.main(["cluster", "status", "--dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no cluster in") and err.count("\n") == 1
