import pytest

from canary.errors import FeatureError
from canary.kafka.features import FeatureLevels, plan

CURRENT = FeatureLevels(finalized={"metadata.version": 21, "group.version": 1},
                        supported={"metadata.version": (7, 27), "group.version": (0, 1), "kraft.version": (0, 1)},
                        epoch=5)


def test_plan_raises_only_what_is_asked_and_skips_reached_levels():
    assert plan(CURRENT, {"metadata.version": 27, "group.version": 1}) == {"metadata.version": (21, 27)}


def test_plan_with_nothing_to_do_is_empty():
    assert plan(CURRENT, {"metadata.version": 21}) == {}


def test_lower_levels_are_refused():
    with pytest.raises(FeatureError, match="only go up"):
        plan(CURRENT, {"metadata.version": 20})


def test_unsupported_levels_are_refused_before_sending():
    with pytest.raises(FeatureError, match="outside the supported range 7-27"):
        plan(CURRENT, {"metadata.version": 28})
    with pytest.raises(FeatureError, match="outside the supported range 0-0"):
        plan(CURRENT, {"share.version": 1})
