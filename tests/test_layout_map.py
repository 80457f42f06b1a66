"""docs/layout.md's map of the code cannot go stale: every package folder of portal/, jobs/, cluster/
and worker/ has its row, every module is named in its folder's row, and the map names nothing that
is not there. A module added, moved or deleted without its line in the map fails here.

A row of the map is a table row whose first cell is a folder in backticks (`| \\`jobs/job/\\` | ...`);
the modules are the backticked `*.py` names anywhere in that row (`__init__.py` is never needed).
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAP = "docs/layout.md"
PACKAGES = ("portal", "jobs", "cluster", "worker")

ROW = re.compile(r"^\|\s*`([\w/]+/)`\s*\|(.*)$")


def on_disk() -> dict[str, set[str]]:
    """{folder/: {module.py, ...}} of every package folder (migrations aside)."""
    out: dict[str, set[str]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            folder = path.parent.relative_to(ROOT).as_posix() + "/"
            out.setdefault(folder, set())
            if path.name != "__init__.py":
                out[folder].add(path.name)
    return out


def in_map() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for line in (ROOT / MAP).read_text().splitlines():
        m = ROW.match(line)
        if m:
            out.setdefault(m.group(1), set()).update(re.findall(r"`([\w]+\.py)`", m.group(2)))
    return out


def differences() -> list[str]:
    disk, drawn = on_disk(), in_map()
    problems = [f"{folder} has no row in {MAP}" for folder in sorted(disk.keys() - drawn.keys())]
    problems += [f"{MAP} names {folder}, which is not a package folder" for folder in sorted(drawn.keys() - disk.keys())]
    for folder in sorted(disk.keys() & drawn.keys()):
        problems += [f"{folder}{name} is not on {MAP}'s row for {folder}" for name in sorted(disk[folder] - drawn[folder])]
        problems += [f"{MAP} names {folder}{name}, which does not exist" for name in sorted(drawn[folder] - disk[folder])]
    return problems


def test_the_map_places_every_module_and_nothing_else():
    problems = differences()
    assert not problems, "\n".join(problems)


def test_the_map_check_sees_a_module_the_map_does_not_place(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for rel in ("jobs/__init__.py", "jobs/job/__init__.py", "jobs/job/start.py", "jobs/job/planted.py",
                "jobs/migrations/0001_initial.py", "portal/settings.py", "cluster/ssh.py", "worker/cli.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / MAP).write_text(
        "| folder | modules |\n| --- | --- |\n| `jobs/` | the app |\n| `jobs/job/` | `start.py` Start; `gone.py` |\n"
        "| `portal/` | `settings.py` |\n| `cluster/` | `ssh.py` |\n| `worker/` | `cli.py` |\n| `jobs/old/` | `x.py` |\n")
    assert differences() == [
        f"{MAP} names jobs/old/, which is not a package folder",
        f"jobs/job/planted.py is not on {MAP}'s row for jobs/job/",
        f"{MAP} names jobs/job/gone.py, which does not exist",
    ]
