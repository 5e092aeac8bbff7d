"""Kafka release numbers: which versions the product knows by default and the rule a version must follow."""

from __future__ import annotations

import re

from canary.errors import SetupError

BASELINE_VERSION = "3.9.2"  # latest 3.9.x: the last release line that still has ZooKeeper mode
TARGET_VERSION = "4.1.2"  # a 4.x release with a higher metadata.version (4.1-IV1)
MIN_VERSION = (3, 7, 0)  # KRaft with directory ids; older releases are not supported here
VERSION_PATTERN = r"^(\d+)\.(\d+)\.(\d+)$"
_VERSION_RE = re.compile(VERSION_PATTERN)


def parse_version(version: str) -> tuple[int, int, int]:
    """'3.9.2' -> (3, 9, 2); raises SetupError for anything that is not a release number."""
    match = _VERSION_RE.match(version.strip()) if isinstance(version, str) else None
    if not match:
        raise SetupError(
            f"Kafka version {version!r} is not a release number; use MAJOR.MINOR.PATCH, e.g. "
            f"{BASELINE_VERSION} or {TARGET_VERSION}"
        )
    parsed = (int(match[1]), int(match[2]), int(match[3]))
    if parsed < MIN_VERSION:
        raise SetupError(
            f"Kafka {version} is too old: the local cluster runs KRaft and needs "
            f"{'.'.join(map(str, MIN_VERSION))} or newer"
        )
    return parsed
