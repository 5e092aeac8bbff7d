"""The learner warm-up trigger (triggers/warm_up.py): its serialize() mirrors its constructor; it fires once the
brokers are in the ISR, or times out saying what is missing."""

from __future__ import annotations

from kafka_canary_provider.triggers.warm_up import LearnerWarmUpTrigger


def test_warm_up_trigger_serialize_mirrors_init():
    trigger = LearnerWarmUpTrigger("kafka_canary_default", [3, 4], timeout=120, poll_interval=1.5, started_at=10.0)
    classpath, kwargs = trigger.serialize()
    assert classpath == "kafka_canary_provider.triggers.warm_up.LearnerWarmUpTrigger"
    again = LearnerWarmUpTrigger(**kwargs)
    assert again.serialize() == (classpath, kwargs)
    assert "password" not in str(kwargs)


def _run_trigger(trigger) -> list:
    import asyncio

    async def collect():
        return [event async for event in trigger.run()]

    return asyncio.run(collect())


def test_warm_up_trigger_fires_once_the_brokers_are_in_isr(monkeypatch):
    looks = iter(["broker 4 not yet in the ISR of 2 partition(s)", RuntimeError("broker restarting"), None])

    def missing(self):
        look = next(looks)
        if isinstance(look, Exception):
            raise look
        return look

    monkeypatch.setattr(LearnerWarmUpTrigger, "_missing", missing)
    events = _run_trigger(LearnerWarmUpTrigger("c", [4], timeout=60, poll_interval=0.01))
    assert len(events) == 1 and events[0].payload["status"] == "in_isr"
    assert events[0].payload["broker_ids"] == [4]


def test_warm_up_trigger_times_out_with_what_is_missing(monkeypatch):
    monkeypatch.setattr(LearnerWarmUpTrigger, "_missing", lambda self: "broker 4 not registered yet")
    events = _run_trigger(LearnerWarmUpTrigger("c", [4], timeout=0.05, poll_interval=0.01))
    assert [e.payload["status"] for e in events] == ["timeout"]
    assert events[0].payload["missing"] == "broker 4 not registered yet"
