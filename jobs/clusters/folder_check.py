"""What a target folder holds, asked of the cluster before Start: "12 photos and 2 videos", or why
it cannot be used (missing, not a folder, not readable, empty, outside the allowed folders). The
allowed folders are those of `jobs.clusters.team_roots`: another team's folder is answered as a
folder outside, and never suggested.

Asked by the New job page as a folder is typed or picked (jobs/web/views/folders.py) and by Start
itself, so an empty or mistyped folder is refused next to its field instead of becoming a job that
fails. When the cluster cannot be reached the answer is "unknown", never a refusal: that is not the
user's mistake, and the job waits to be submitted as before (jobs.job.submit counts the folder again).
"""
from __future__ import annotations

import logging
import posixpath
import time
from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import ngettext

import cluster
from cluster import ClusterError, ClusterUnreachable, PathNotAllowed, RemoteFileError, list_folder_in_roots
from jobs.clusters.team_roots import Roots
from worker.manifest import IMAGE_EXTENSIONS, is_video_name

log = logging.getLogger(__name__)

#: seconds a folder check may take; past that the answer is "unknown" and Start goes ahead
CHECK_TIMEOUT_S = 15


@dataclass(frozen=True)
class FolderCount:
    path: str
    images: int = 0
    videos: int = 0
    problem: str = ""  # why the folder cannot be used; empty: it can (or: unknown, see `reachable`)
    reachable: bool = True  # False: the cluster did not answer; nothing is known

    @property
    def ok(self) -> bool:
        return not self.problem

    def summary(self) -> str:
        """What the user reads next to the field."""
        if self.problem:
            return self.problem
        if not self.reachable:
            return _("The cluster is not answering right now, so the folder could not be checked; "
                     "you can still start, and the job waits for the cluster.")
        photos = ngettext("%(n)s photo", "%(n)s photos", self.images) % {"n": self.images}
        videos = ngettext("%(n)s video", "%(n)s videos", self.videos) % {"n": self.videos}
        if self.images and self.videos:
            return _("%(photos)s and %(videos)s found.") % {"photos": photos, "videos": videos}
        return _("%(what)s found.") % {"what": photos if self.images else videos}


def count_folder(profile, path: str, roots: Roots) -> FolderCount:
    """Count the photos and videos directly in `path` (as jobs.job.submit will: the same listing, the
    same rules: hidden files and links leading outside are left out), within `roots` (team_roots:
    the user's, or those of a job's team)."""
    try:
        runner = cluster.runner_for(profile)
        listing = list_folder_in_roots(runner, path, list(roots.allowed), timeout=CHECK_TIMEOUT_S, refused=roots.refused)
    except PathNotAllowed:
        return FolderCount(path, problem=outside_words(path, roots, runner))
    except RemoteFileError as exc:
        words = {2: _("There is no folder %(folder)s on the cluster. Check the spelling, or pick it with Browse."),
                 20: _("%(folder)s is a file, not a folder. Pick the folder that holds it."),
                 13: _("The cluster does not let the portal read %(folder)s. Ask an admin to give it read access.")}
        return FolderCount(path, problem=words.get(exc.errno, words[2]) % {"folder": path})
    except ClusterError as exc:
        log.info("folder check of %s on %s: cluster not answering: %s", path, profile.slug, exc)
        return FolderCount(path, reachable=False)
    usable = [e for e in listing.entries if e.type == "file" and not e.name.startswith(".") and not e.refused]
    images = sum(1 for e in usable if e.name.lower().endswith(IMAGE_EXTENSIONS))
    videos = sum(1 for e in usable if is_video_name(e.name))
    if not images and not videos:
        return FolderCount(listing.path, problem=_("There are no photos or videos directly in %(folder)s (sub-folders "
                                                   "are not searched). Pick the folder that holds them.") % {"folder": path})
    return FolderCount(listing.path, images=images, videos=videos)


#: at most this many folders are tried for "Did you mean …?" (one listing each)
SUGGESTIONS_TRIED = 4


def suggestions(path: str, roots: list[str]) -> list[str]:
    """Where a folder typed outside the allowed roots may really be, nearest first: a relative
    `ux3/photos` under each root; an absolute `/storage/ux3/photos` under a root whose last folder
    (`/srv/ffportal/storage`) it names. Pure: nothing is asked of the cluster."""
    parts = [p for p in path.strip().split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        return []
    clean = [r.rstrip("/") or "/" for r in roots]
    if not path.strip().startswith("/"):
        return [posixpath.join(r, *parts) for r in clean]
    found = []
    for root in clean:
        name = posixpath.basename(root)
        if name in parts:
            rest = parts[parts.index(name) + 1:]
            found.append(posixpath.join(root, *rest) if rest else root)
    return found


def outside_words(path: str, roots: Roots, runner) -> str:
    """The refusal of a folder outside the allowed roots (or inside another team's folder: the same
    words), with the folder it likely meant when one of `suggestions` exists on the cluster and may
    be used (never another team's folder: a candidate there is refused before the cluster is asked),
    else the allowed roots themselves."""
    allowed = list(roots.allowed)
    # One check's time for all the candidates together, and none after the cluster stopped answering:
    # Start asks this in the web request, and a slow cluster must not hold it for minutes.
    deadline = time.monotonic() + CHECK_TIMEOUT_S
    for candidate in suggestions(path, allowed)[:SUGGESTIONS_TRIED]:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            list_folder_in_roots(runner, candidate, allowed, timeout=left, refused=roots.refused)
        except ClusterUnreachable:  # not answering (or too slow): the plain refusal, at once
            break
        except ClusterError:  # missing, or outside (or another team's) through a link: the next one
            continue
        return _("%(folder)s is not one of the folders you may use. Did you mean %(suggestion)s?") % {
            "folder": path, "suggestion": candidate}
    return _("%(folder)s is outside the folders you may use. Folders you may use: %(roots)s. Pick one with the "
             "folder browser.") % {"folder": path, "roots": ", ".join(allowed)}
