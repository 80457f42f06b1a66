#!/usr/bin/env bash
# GPU check of the worker (not part of CI): installs the GPU worker requirements unless an
# onnxruntime with the CUDA provider is already importable, then runs
# - bench/worker_gpu.py: the provider that actually ran, per-image time and peak GPU memory;
# - bench/worker_pipeline.py: a 1080p single-face video through the worker's own video path:
#   frames/s end to end, each stage's busy share, GPU busy %, peak GPU memory, where ffmpeg
#   decoded and encoded (NVDEC/NVENC when the GPU has them), and the CPU-side ms per frame.
#
#   bash bench/worker_gpu.sh [N_IMAGES] [VIDEO_RUNS]
# Env: PYTHON (default python3); SITE (install target, default /tmp/ffp-gpu-site);
#      WHEELS (a folder of wheels for an offline install); FACEFUSION_MODELS_DIR (real models).
# Exit 3 when the engine ran on the CPU although this script is about the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=${SITE:-/tmp/ffp-gpu-site}
has_cuda() {
  "$PY" -c "import onnxruntime as o, sys; sys.exit('CUDAExecutionProvider' not in o.get_available_providers())" 2>/dev/null
}
if ! has_cuda; then
  echo "installing the GPU worker requirements into $SITE"
  if [ -n "${WHEELS:-}" ]; then
    "$PY" -m pip install -q --no-index --no-deps --target "$SITE" "$WHEELS"/*.whl
  else
    "$PY" -m pip install -q --target "$SITE" -r worker/requirements-gpu.txt
    "$PY" -m pip install -q --target "$SITE" --no-deps -r worker/requirements-nodeps.txt
  fi
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || echo "nvidia-smi: not available"
rc=0
"$PY" bench/worker_gpu.py "${1:-50}" || rc=$?
"$PY" bench/worker_pipeline.py --runs "${2:-3}" || rc=$?
exit "$rc"
