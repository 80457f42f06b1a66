"""Where the browser tests put the pictures they take of the pages: artifacts/screenshots/ in a test
run, docs/screenshots/ for `make screenshots` (FFP_SCREENSHOTS), which refreshes the ones the docs show."""
import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SHOTS = Path(os.environ.get("FFP_SCREENSHOTS") or REPO / "artifacts" / "screenshots")
