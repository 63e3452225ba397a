"""Smart Turn v3.2 (Pipecat's end-of-turn model, BSD-2-Clause) on onnxruntime.

The model reads the last 8 s of a turn at 16 kHz and answers the probability that the
speaker finished a thought. Its input is prepared as Pipecat's LocalSmartTurnAnalyzerV3
prepares it (pipecat/audio/turn/smart_turn/local_smart_turn_v3.py, 1.14.0): the audio cut to
its last 8 s or padded with zeros at the start to 8 s, normalised to zero mean and unit
variance, then Whisper's 80-band log-mel features over 8 s (80 x 800), here computed by
faster-whisper's FeatureExtractor (the same numbers as Pipecat's numpy copy, to 1e-5).

The ONNX file is installed by scripts/fetch-turn-model into the environment
(`installed_turn_model()`); nothing is downloaded at run time. One session per file serves the
process (loaded once, like the speech model, and shared by every factory):
inference runs in the model's own threads (`workers` at a time, one core each), never on the
event loop and never in the recognizer's queue, so a check waits for no speech decode and
delays none. About 45 ms per check on one core of the 2-core machine (docs/engine.md).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from parley.engine.audio import Samples
from parley.engine.errors import TurnModelUnavailable

logger = logging.getLogger(__name__)

MODEL_NAME = "smart-turn-v3.2-cpu.onnx"
SAMPLE_RATE = 16_000
WINDOW_S = 8
_NORMALISE_EPS = 1e-7  # Pipecat's variance floor


def installed_turn_model() -> Path:
    """Return where scripts/fetch-turn-model installs the model (in this environment)."""
    return Path(sys.prefix) / "share" / "parley" / "models" / MODEL_NAME


def check_turn_model(path: Path) -> None:
    """Raise TurnModelUnavailable unless `path` is a file (the loader checks the rest)."""
    if not path.is_file():
        raise TurnModelUnavailable(
            f"The end-of-turn model {path} is not installed: run scripts/install."
        )


def model_input(samples: Samples) -> Samples:
    """Return the model's features (1 x 80 x 800) for a turn's audio at 16 kHz."""
    size = WINDOW_S * SAMPLE_RATE
    audio = np.asarray(samples[-size:], dtype=np.float32)
    if audio.size < size:
        audio = np.pad(audio, (size - audio.size, 0))
    audio = (audio - audio.mean()) / np.sqrt(audio.var() + _NORMALISE_EPS)
    features = _extractor()(audio, padding=0)
    return np.ascontiguousarray(features[None], dtype=np.float32)


_features: Any = None
_sessions: dict[str, Any] = {}  # resolved path -> warmed-up onnxruntime session
_sessions_lock = threading.Lock()


def _extractor() -> Any:
    """faster-whisper's FeatureExtractor over 8 s, built once (its mel filters take a while)."""
    global _features
    if _features is None:
        from faster_whisper.feature_extractor import FeatureExtractor

        _features = FeatureExtractor(
            feature_size=80, sampling_rate=SAMPLE_RATE, chunk_length=WINDOW_S
        )
    return _features


class SmartTurn:
    """The end-of-turn model, shared by every conversation of the process."""

    sample_rate = SAMPLE_RATE

    def __init__(self, path: Path | None = None, *, workers: int = 2) -> None:
        self.path = path or installed_turn_model()
        check_turn_model(self.path)
        self._session: Any = None
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="parley-turn")

    async def warm_up(self) -> None:
        """Load the model once per process and run it once (a session's first run is slower)."""
        if self._session is None:
            self._session = await anyio.to_thread.run_sync(self._shared_session)

    def _shared_session(self) -> Any:
        key = str(self.path.resolve())
        with _sessions_lock:
            session = _sessions.get(key)
            if session is None:
                session = self._load()
                session.run(
                    None, {"input_features": model_input(np.zeros(SAMPLE_RATE, dtype=np.float32))}
                )
                _sessions[key] = session
            return session

    async def probability(self, samples: Samples) -> tuple[float, float]:
        """Return the probability that the turn so far is complete, and the seconds it took."""
        if self._session is None:
            await self.warm_up()
        return await asyncio.get_running_loop().run_in_executor(
            self._executor, self.predict, samples
        )

    def predict(self, samples: Samples) -> tuple[float, float]:
        """Run the model on this thread: (probability of a finished thought, seconds)."""
        began = time.perf_counter()
        features = model_input(samples)
        outputs = self._session.run(None, {"input_features": features})
        return float(np.asarray(outputs[0]).reshape(-1)[0]), time.perf_counter() - began

    async def aclose(self) -> None:
        """Stop the model's threads once the checks in progress end."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def _load(self) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.inter_op_num_threads = 1
        options.intra_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            session = ort.InferenceSession(
                str(self.path), sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # onnxruntime raises its own classes for a bad file
            raise TurnModelUnavailable(f"The end-of-turn model {self.path} does not load.") from exc
        inputs = session.get_inputs()
        if [i.name for i in inputs] != ["input_features"] or inputs[0].shape[1:] != [80, 800]:
            raise TurnModelUnavailable(f"{self.path} is not a Smart Turn v3 model.")
        logger.info("loaded end-of-turn model %s", self.path)
        return session
