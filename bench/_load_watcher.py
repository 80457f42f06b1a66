"""The load run's watcher: `manage.py watch_cluster --profile <slug>`, the real loop, in its own process
(as make up runs it), with one addition for the bench: every cycle's seconds and SSH execs are
appended to the file named by $FFP_LOAD_CYCLES, from the same call that feeds /metrics
(`jobs.ops.metrics.watcher_cycle`), so the bench gets each cycle, not a histogram's buckets.

Usage (bench/load_run.py starts it): python bench/_load_watcher.py <profile slug>
"""
from __future__ import annotations

import functools
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from jobs.ops import metrics  # noqa: E402

_observe = metrics.watcher_cycle
_out = open(os.environ["FFP_LOAD_CYCLES"], "a", buffering=1)


def _timed(seconds: float, execs: int) -> None:
    _out.write(f"{time.time():.3f} {seconds:.4f} {execs}\n")
    _observe(seconds, execs)


metrics.watcher_cycle = _timed  # the loop calls it through the module: jobs.watcher.loop.run
watch = functools.partial(call_command, "watch_cluster", "--profile", sys.argv[1])
if os.environ.get("FFP_LOAD_PROFILE"):  # where the cycle's time goes: cProfile's top functions, at the end
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.runcall(watch)
    with open(os.environ["FFP_LOAD_PROFILE"], "w") as out:
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(45)
else:
    watch()
