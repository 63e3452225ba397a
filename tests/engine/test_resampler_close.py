"""A stream resampler frees libsoxr's stream when closed, not when the resampler itself is
freed (issue #38: a listener left in a reference cycle kept its stream past `parley serve`'s
exit, and nanobind reported it leaked)."""

from __future__ import annotations

import weakref

import numpy as np
import pytest
import soxr

from parley.engine.audio import StreamResampler


def test_stream_resampler_close_frees_soxr_stream_while_resampler_lives() -> None:
    resampler = StreamResampler(8000, 16000)
    assert resampler.feed(np.zeros(160, dtype=np.float32)).dtype == np.float32
    streams = [o for o in vars(resampler).values() if isinstance(o, soxr.ResampleStream)]
    assert len(streams) == 1
    stream = weakref.ref(streams[0])
    del streams
    resampler.close()
    assert stream() is None


def test_stream_resampler_feed_after_close_refused() -> None:
    for rates in ((8000, 16000), (16000, 16000)):
        resampler = StreamResampler(*rates)
        resampler.close()
        resampler.close()  # idempotent
        with pytest.raises(ValueError, match="closed"):
            resampler.feed(np.zeros(160, dtype=np.float32))
