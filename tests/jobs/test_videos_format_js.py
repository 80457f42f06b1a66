"""The live script's time-left words for a running video (static/js/live/format.js), run in Node:
the same pace rule as the server's (jobs.models.job.seconds_left), rounded as a person would say it."""
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jobs.models.job import seconds_left

FORMAT_JS = Path(__file__).resolve().parents[2] / "static" / "js" / "live" / "format.js"


def node(expression: str):
    if not shutil.which("node"):
        pytest.fail("node is not installed (apt-get install nodejs)", pytrace=False)
    script = f"import * as f from {json.dumps(FORMAT_JS.as_uri())}; console.log(JSON.stringify({expression}));"
    out = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("seconds, done, total", [(80, 1200, 1800), (3.5, 25, 80), (0, 0, 1800), (80, 1200, None),
                                                  (80, 1800, 1800), (None, 25, 100)])
def test_the_script_and_the_server_tell_the_same_time_left(seconds, done, total):
    assert node(f"f.secondsLeft({json.dumps(seconds)}, {done}, {json.dumps(total)})") == seconds_left(seconds, done, total)


def test_time_left_is_rounded_as_people_say_it():
    cases = [3, 40, 88, 95, 60 * 25, 60 * 89, 60 * 95, 3600 * 5.4]
    got = node("[" + ",".join(f"f.roughTime({s})" for s in cases) + "]")
    assert [(g["n"], g["unit"]) for g in got] == [(5, "s"), (40, "s"), (90, "s"), (2, "min"), (25, "min"),
                                                  (89, "min"), (2, "h"), (5, "h")]
