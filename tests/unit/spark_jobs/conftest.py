"""spark_jobs/ is a folder of jobs, not an installed package: its tests import it from the repository. The `spark`
session fixture is the suite's (tests/conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
