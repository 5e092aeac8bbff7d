"""One local Spark session for every Spark test (lean: local[2], few shuffle partitions, no UI)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))  # spark_jobs/ is a folder of jobs, not an installed package



def _pandas_on_spark_stub() -> None:
    """pyspark 4.2's assertDataFrameEqual imports pyspark.pandas whenever pandas and pyarrow are installed, and
    pyspark.pandas does not import under pandas 3 (requirements.lock pins pandas 3.1). We only compare Spark
    DataFrames, so when the real module cannot load, a stub whose DataFrame nothing is an instance of stands in."""
    try:
        import pyspark.pandas  # noqa: F401
        import pyspark.testing.pandasutils  # noqa: F401
    except ImportError:
        for name in [n for n in sys.modules if n.startswith("pyspark.pandas") or n == "pyspark.testing.pandasutils"]:
            del sys.modules[name]
        ps = types.ModuleType("pyspark.pandas")
        ps.DataFrame = type("DataFrame", (), {})
        utils = types.ModuleType("pyspark.testing.pandasutils")
        utils.PandasOnSparkTestUtils = type("PandasOnSparkTestUtils", (), {})
        sys.modules.update({"pyspark.pandas": ps, "pyspark.testing.pandasutils": utils})


_pandas_on_spark_stub()


@pytest.fixture(scope="session")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("kafka-canary-tests")
               .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        yield session
    finally:
        session.stop()
