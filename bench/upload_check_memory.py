"""Memory of the upload check (jobs.uploads.on_complete.check_arrived) when K crafted uploads arrive at once.

Two cases, each the review's attack on one web process:

  png   K uploads of a --png-side x --png-side RGBA PNG of one colour (a few hundred KB on disk,
        --png-side^2 x 4 bytes decoded), checked as targets
  mkv   K uploads of a one-frame Matroska video whose frame is a --mkv-side x --mkv-side PNG
        (about a megabyte on disk; ffprobe and the poster's ffmpeg decode it)

Each run is a fresh Python process with its own SQLite copy of a migrated database: it imports and
warms the check on a small photo, resets the kernel's peak-RSS mark (/proc/self/clear_refs), starts
K threads that call check_arrived together (a barrier), and reports the peak RSS over the RSS just
before (VmHWM - VmRSS), the largest peak of any child it ran (ffprobe, ffmpeg), and what each upload
became. Printed per case: min / median / max over --repeats runs, the runs of the cases alternating.
A child's peak counts the memory of the process it was forked from until it starts ffprobe or
ffmpeg, so a small child reads as about the run's own RSS before (printed too): that is its floor.

Usage: .venv/bin/python bench/upload_check_memory.py [--uploads 4] [--repeats 3] [--png-side 7000]
       [--mkv-side 16000] [--cases png,mkv]
Run it against two checkouts (the same venv) to compare them; it imports the portal it lies in.
Needs ffmpeg on PATH; no Redis, Slurm or network.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIB = 1024 * 1024


def _kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _django(db: Path, media: Path) -> None:
    sys.path.insert(0, str(ROOT))
    os.environ["DATABASE_URL"] = f"sqlite:///{db}"
    os.environ["MEDIA_ROOT"] = str(media)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "portal.settings")
    os.environ.setdefault("LOG_LEVEL", "ERROR")
    import django

    django.setup()


def make_files(folder: Path, png_side: int, mkv_side: int) -> dict[str, Path]:
    from PIL import Image

    files = {"png": folder / "crafted.png", "small": folder / "small.png", "mkv": folder / "crafted.mkv"}
    Image.new("RGBA", (png_side, png_side), (40, 90, 160, 255)).save(files["png"])
    Image.new("RGB", (64, 48), (200, 120, 90)).save(files["small"])
    frame = folder / "frame.png"
    Image.new("RGBA", (mkv_side, mkv_side), (40, 90, 160, 255)).save(frame)
    subprocess.run(["ffmpeg", "-nostdin", "-v", "error", "-y", "-framerate", "1", "-i", f"file:{frame}",
                    "-c:v", "copy", "-f", "matroska", f"file:{files['mkv']}"], check=True)
    frame.unlink()
    return files


def migrated_db(folder: Path) -> Path:
    db = folder / "template.sqlite3"
    env = dict(os.environ, DATABASE_URL=f"sqlite:///{db}", DJANGO_SETTINGS_MODULE="portal.settings")
    subprocess.run([sys.executable, str(ROOT / "manage.py"), "migrate", "--verbosity", "0"], env=env, check=True,
                   cwd=ROOT)
    return db


def child(case: str, k: int, files: dict[str, Path], template_db: Path) -> dict:
    """One run (in its own process): K uploads of `case` checked at once."""
    work = Path(tempfile.mkdtemp(prefix="ffp-bench-check-"))
    try:
        db = work / "db.sqlite3"
        shutil.copyfile(template_db, db)
        _django(db, work / "media")
        from django.contrib.auth.models import User

        from jobs.models import UploadKind
        from jobs.uploads import store as upload_store
        from jobs.uploads.on_complete import check_arrived

        user = User.objects.create_user("bench")

        def upload_of(path: Path):
            upload = upload_store.create(user, UploadKind.TARGET, path.name, path.stat().st_size)
            shutil.copyfile(path, upload.path)
            type(upload).objects.filter(pk=upload.pk).update(offset=upload.size, received=upload.size)
            upload.offset = upload.received = upload.size
            return upload

        check_arrived(upload_of(files["small"]))  # imports, the face detector's first use
        uploads = [upload_of(files[case]) for _ in range(k)]
        Path("/proc/self/clear_refs").write_text("5")  # the peak (VmHWM) starts again from here
        before = _kib("VmRSS")
        start = threading.Barrier(k)

        def run(upload):
            start.wait()
            check_arrived(upload)

        threads = [threading.Thread(target=run, args=(u,)) for u in uploads]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        peak = _kib("VmHWM")
        verdicts = []
        for u in uploads:
            u.refresh_from_db()
            verdicts.append(f"{u.status}: {u.problem}" if u.problem else str(u.status))
        return {"growth_mib": (peak - before) / 1024, "before_mib": before / 1024, "children_peak_mib":
                resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, "verdicts": sorted(set(verdicts))}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def spread(values: list[float]) -> str:
    return f"{min(values):.0f} / {statistics.median(values):.0f} / {max(values):.0f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uploads", type=int, default=4, help="uploads checked at once (K)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--png-side", type=int, default=7000)
    ap.add_argument("--mkv-side", type=int, default=16000)
    ap.add_argument("--cases", default="png,mkv")
    ap.add_argument("--child", help=argparse.SUPPRESS)  # "case|folder": one run, JSON on stdout
    args = ap.parse_args()
    if args.child:
        case, folder = args.child.split("|", 1)
        folder = Path(folder)
        files = {n: folder / f for n, f in (("png", "crafted.png"), ("small", "small.png"), ("mkv", "crafted.mkv"))}
        print(json.dumps(child(case, args.uploads, files, folder / "template.sqlite3")))
        return
    folder = Path(tempfile.mkdtemp(prefix="ffp-bench-files-"))
    try:
        files = make_files(folder, args.png_side, args.mkv_side)
        migrated_db(folder)
        cases = [c for c in args.cases.split(",") if c]
        results: dict[str, list[dict]] = {c: [] for c in cases}
        for _ in range(args.repeats):
            for case in cases:
                out = subprocess.run([sys.executable, __file__, "--uploads", str(args.uploads),
                                      "--child", f"{case}|{folder}"], capture_output=True, text=True, cwd=ROOT)
                if out.returncode != 0:
                    sys.exit(f"{case} run failed:\n{out.stderr[-3000:]}")
                results[case].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"portal: {ROOT}; {args.uploads} uploads at once; {args.repeats} runs per case")
        print(f"files: png {files['png'].stat().st_size // 1024} KiB ({args.png_side}x{args.png_side} RGBA), "
              f"mkv {files['mkv'].stat().st_size // 1024} KiB ({args.mkv_side}x{args.mkv_side} PNG frame)")
        for case, runs in results.items():
            print(f"{case}: process peak RSS growth MiB (min / median / max): "
                  f"{spread([r['growth_mib'] for r in runs])}; largest child peak MiB: "
                  f"{spread([r['children_peak_mib'] for r in runs])} (RSS before: "
                  f"{spread([r['before_mib'] for r in runs])})")
            for verdict in sorted({v for r in runs for v in r["verdicts"]}):
                print(f"    became: {verdict}")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
