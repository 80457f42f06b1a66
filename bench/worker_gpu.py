"""GPU check of the insightface engine on onnxruntime-gpu: which provider ACTUALLY ran, per-image
time and peak GPU memory. Run through bench/worker_gpu.sh on a machine with an NVIDIA GPU.

Uses the real models when $FACEFUSION_MODELS_DIR holds all three with the right SHA-256; otherwise
the synthetic test models (tests/worker/fake_models.py), and then it SAYS so: those prove the CUDA
path runs, but their timings say nothing about real-model speed.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


class GpuMemory:
    """Polls nvidia-smi (used MiB on GPU 0) in a thread; peak above the starting baseline."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _read(self) -> int | None:
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                                 capture_output=True, text=True, timeout=5).stdout
            return int(out.strip().splitlines()[0])
        except Exception:  # noqa: BLE001 - no nvidia-smi, or no answer: the memory column stays empty
            return None

    def _run(self) -> None:
        while not self._stop.is_set():
            v = self._read()
            if v is not None:
                self.samples.append(v)
            self._stop.wait(0.05)

    def __enter__(self):
        self.baseline = self._read()
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()

    @property
    def peak_mib(self) -> int | None:
        if not self.samples or self.baseline is None:
            return None
        return max(self.samples) - self.baseline


def main() -> int:
    import numpy as np
    import onnxruntime as ort

    if hasattr(ort, "preload_dlls"):  # CUDA/cuDNN from pip's nvidia-* packages, where that is how they came
        try:
            ort.preload_dlls()
        except Exception as exc:  # noqa: BLE001 - reported, the session creation below decides
            print(f"preload_dlls: {exc}")
    from skimage import data

    from worker.engines.insightface_engine import InsightFaceEngine
    from worker.errors import ModelError
    from worker.weights import INSIGHTFACE_MODELS, verify_models

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    models_dir = os.environ.get("FACEFUSION_MODELS_DIR")
    registry = None
    synthetic = False
    try:
        verify_models(models_dir, INSIGHTFACE_MODELS)
    except ModelError as exc:
        from tests.worker.fake_models import build_fake_models

        print(f"real models not usable ({exc}); using the SYNTHETIC test models")
        models_dir = tempfile.mkdtemp(prefix="ffp-fake-models-")
        registry = build_fake_models(models_dir)
        synthetic = True

    img = np.ascontiguousarray(np.asarray(data.astronaut())[:, :, ::-1])
    with GpuMemory() as mem:
        t0 = time.perf_counter()
        engine = InsightFaceEngine(models_dir=models_dir, registry=registry)
        identity = engine.identity([img])
        load = time.perf_counter() - t0
        times = []
        for _ in range(n):
            t1 = time.perf_counter()
            faces = engine.detect(img)
            out = engine.swap(img, faces, identity)
            times.append(time.perf_counter() - t1)
    changed = float(np.abs(out.astype(int) - img.astype(int)).mean())
    result = {
        "onnxruntime": ort.__version__,
        "available_providers": ort.get_available_providers(),
        "provider_that_ran": engine.device,
        "models": "synthetic (timings NOT representative of real models)" if synthetic else "real",
        "images": n,
        "faces_per_image": len(faces),
        "load_seconds": round(load, 3),
        "first_image_seconds": round(times[0], 4),
        "steady_state_seconds_per_image": round(statistics.median(times[5:] if n > 10 else times), 5),
        "peak_gpu_memory_mib_above_baseline": mem.peak_mib,
        "mean_abs_pixel_change": round(changed, 2),
    }
    print(json.dumps(result, indent=2))
    return 0 if "CUDA" in engine.device else 3


if __name__ == "__main__":
    sys.exit(main())
