"""The modules the portal imports stay light, and the worker's choices are defined once."""
import subprocess
import sys
from pathlib import Path

import worker.choices as choices
from worker.engines.base import ENGINE_NAMES
from worker.manifest import FACE_SELECTORS
from worker.progress import SUCCESS_STATUSES, TARGET_STATUSES

ROOT = Path(__file__).resolve().parents[2]
HEAVY = "{'numpy','cv2','onnxruntime','insightface','dlib','PIL'}"


def test_the_portal_facing_modules_import_no_numpy_opencv_or_onnxruntime():
    code = ("import worker.manifest, worker.progress, worker.layout, worker.choices, worker.errors; import sys; "
            f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY}))")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_the_choices_are_the_ones_the_worker_validates_and_offers():
    assert choices.ENGINE_NAMES == ("auto", "classic", "insightface") == ENGINE_NAMES
    assert choices.FACE_SELECTORS == ("many", "one", "reference") == FACE_SELECTORS
    assert choices.TARGET_STATUSES == ("done", "failed", "no_face", "skipped", "running") == TARGET_STATUSES
    assert choices.SUCCESS_STATUSES == SUCCESS_STATUSES == {"done", "no_face", "skipped"}
    assert SUCCESS_STATUSES < set(TARGET_STATUSES)
    assert choices.TASK_STATES == ("running", "finished")
