"""A job that runs in a container: its image checked on the cluster before the job is submitted,
and recorded with the job (path + SHA-256, `Job.container_image_used`) next to the models it used.

The check is one SSH round trip (cluster.images); the SHA-256 is computed on the cluster only when
the file changed since the portal last hashed it (its size and modification time, kept in the
cache), since hashing an image of several hundred MB takes seconds.
"""
from __future__ import annotations

import hashlib

from django.core.cache import cache
from django.utils.translation import gettext as _

from cluster import images
from cluster.errors import CommandFailed
from jobs.errors import SubmitRejected
from jobs.models import Job

DIGEST_TTL = 30 * 24 * 3600  # a digest is recomputed at least monthly, even for an unchanged file


def _cache_key(job: Job, path: str) -> str:
    return f"container-image:{job.cluster_id}:{hashlib.sha256(path.encode()).hexdigest()}"


def check_image(runner, job: Job) -> dict:
    """{"image": path, "sha256": hex} of the job's container image on its cluster; {} when the job
    runs without one. SubmitRejected, in plain words, when the image is not there or not readable."""
    path = job.snapshot.container_image
    if not path:
        return {}
    stat_res, readable_res = runner.run_batch(images.image_check_argvs(path), timeout=30)
    check = images.parse_image_check(stat_res.rc, stat_res.stdout, readable_res.rc)
    if not check.ok:
        raise SubmitRejected(_why(check.verdict) % {"image": path, "template": job.snapshot.name})
    key = _cache_key(job, path)
    known = cache.get(key)
    if isinstance(known, dict) and known.get("size") == check.size and known.get("mtime") == check.mtime:
        digest = known.get("sha256", "")
    else:
        res = runner.run(images.digest_argv(path), timeout=600)
        digest = images.parse_digest(res.stdout) if res.rc == 0 else ""
        if not digest:
            raise CommandFailed(f"sha256sum of the container image failed (exit status {res.rc}): "
                                f"{res.stderr.strip()[-300:]}", res.rc, res.stderr)
        cache.set(key, {"size": check.size, "mtime": check.mtime, "sha256": digest}, DIGEST_TTL)
    return {"image": path, "sha256": digest}


def _why(verdict: str) -> str:
    # Whole sentences, one per case: translations put the parts in their own order and punctuation.
    if verdict == "missing":
        return _("The container image %(image)s is not on the cluster. Nothing ran; ask an admin to check the "
                 "template %(template)s.")
    if verdict == "unreadable":
        return _("The container image %(image)s is on the cluster, but the portal's cluster account may not "
                 "read it. Nothing ran; ask an admin to check the template %(template)s.")
    return _("%(image)s on the cluster is not a container image file. Nothing ran; ask an admin to check the "
             "template %(template)s.")
