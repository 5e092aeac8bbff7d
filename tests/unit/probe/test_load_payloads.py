"""The load's record values: data a compressor and a broker must really work on, the same in every lane."""

from __future__ import annotations

import gzip

from canary.probe.load import PAYLOADS, payloads


def test_values_have_the_record_size_differ_and_repeat_from_run_to_run():
    values = payloads(1000)
    assert len(values) == PAYLOADS and {len(v) for v in values} == {1000}
    assert len(set(values)) == PAYLOADS
    assert payloads(1000) == values  # the same data whichever process or lane sends it


def test_a_batch_of_them_compresses_like_text_not_to_nothing():
    batch = b"".join(payloads(1000))
    repeated = b"x" * len(batch)
    ratio = len(batch) / len(gzip.compress(batch))
    assert 1.2 < ratio < 2.5, ratio  # random capital letters: ~4.7 bits of 8 per byte
    assert len(repeated) / len(gzip.compress(repeated)) > 100  # what the load sent before: no work at all
