"""Which of Kafka's tools an image of a release gets, from the classes its jars hold."""

from __future__ import annotations

import zipfile
from pathlib import Path

from canary.containers.images import TOOLS, tool_scripts


def jar(path: Path, *classes: str) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for name in classes:
            z.writestr(name.replace(".", "/") + ".class", b"")


def test_each_tool_runs_the_class_its_release_has(tmp_path: Path) -> None:
    jar(tmp_path / "kafka_2.13-3.9.2.jar", "kafka.admin.BrokerApiVersionsCommand", "kafka.tools.StorageTool")
    jar(tmp_path / "kafka-tools-3.9.2.jar", "org.apache.kafka.tools.MetadataQuorumCommand")
    jar(tmp_path / "other-1.0.jar", "org.apache.kafka.tools.TopicCommand")  # not a Kafka jar: not looked in
    scripts = tool_scripts(tmp_path)
    assert set(scripts) == {"kafka-broker-api-versions.sh", "kafka-storage.sh", "kafka-metadata-quorum.sh"}
    assert scripts["kafka-broker-api-versions.sh"] == (
        '#!/bin/sh\nexec /opt/kafka/bin/kafka-run-class.sh kafka.admin.BrokerApiVersionsCommand "$@"\n')


def test_a_newer_home_of_a_tool_wins(tmp_path: Path) -> None:
    old, new = TOOLS["kafka-broker-api-versions.sh"][1], TOOLS["kafka-broker-api-versions.sh"][0]
    jar(tmp_path / "kafka-tools-4.1.2.jar", old, new)
    assert new in tool_scripts(tmp_path)["kafka-broker-api-versions.sh"]
