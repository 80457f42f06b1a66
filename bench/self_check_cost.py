"""What the worker's look at its own results (worker.selfcheck) costs, next to the swap it checks.

The classic engine (dlib, CPU) on real photos: a portrait with one face (scikit-image's astronaut)
and a group photo with six (insightface's t1; four are swapped, two are turned toward profile).
For each, the swap and the check are timed alternately, `--rounds` times, and min / median / max
printed in milliseconds with the check's share of the two. Nothing is written to disk.

    .venv/bin/python bench/self_check_cost.py [--rounds 7]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.worker import photos
from worker.engines.classic import ClassicEngine
from worker.selfcheck import check_swap


def ms(values: list[float]) -> str:
    return f"{min(values) * 1e3:7.1f} {statistics.median(values) * 1e3:7.1f} {max(values) * 1e3:7.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    rounds = parser.parse_args().rounds
    engine = ClassicEngine()
    identity = engine.identity([photos.tom_hanks()])
    cases = {"portrait, 1 face": photos.astronaut(), "group, 6 faces": photos.t1()}
    print(f"classic engine, {rounds} rounds; ms min / median / max")
    print(f"{'photo':18} {'faces':>5} {'swap':>23} {'check':>23} {'check share':>12}")
    for name, image in cases.items():
        swap_s, check_s = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            faces = [f for f in engine.detect(image) if not engine.too_turned(f)]
            out = engine.swap(image, faces, identity)
            t1 = time.perf_counter()
            verdict = check_swap(engine, identity, image, out, faces)
            t2 = time.perf_counter()
            swap_s.append(t1 - t0)
            check_s.append(t2 - t1)
        share = statistics.median(check_s) / (statistics.median(swap_s) + statistics.median(check_s))
        print(f"{name:18} {len(faces):>5} {ms(swap_s):>23} {ms(check_s):>23} {share:>11.0%}  "
              f"verdict: {verdict.code or 'took'} {verdict.params or ''}")


if __name__ == "__main__":
    main()
