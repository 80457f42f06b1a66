"""The folder browser: pick a target folder on cluster storage, within the allowed roots."""
from __future__ import annotations

import posixpath

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_safe

from jobs.clusters import browse as browsing  # the module, so tests can swap browsing.browse
from jobs.clusters import team_roots
from jobs.clusters.folder_check import count_folder
from jobs.errors import BrowseError
from worker.manifest import IMAGE_EXTENSIONS, is_video_name

#: files listed under a folder's sub-folders; the rest are counted (a shoot can hold thousands)
FILES_SHOWN = 200


@login_required
@require_safe
def folder_browse(request: HttpRequest) -> HttpResponse:
    """`?path=` a folder (none: the allowed roots), `?cluster=` a profile slug, `?partial=1` the
    listing alone, for the New job page's inline browser."""
    path = request.GET.get("path", "").strip()
    slug = request.GET.get("cluster", "").strip()
    context: dict = {"path": path, "cluster": slug, "error": ""}
    status = 200
    profiles = browsing.profiles_for(request.user)
    profile = next((p for p in profiles if p.slug == slug), None) if slug else (profiles[0] if profiles else None)
    try:
        if slug and profile is None:
            raise BrowseError(_("No such cluster."), 404)
        listing = browsing.browse(request.user, path, profile)
    except BrowseError as exc:
        context["error"], status = exc.message, exc.status
    else:
        entries = listing["entries"]
        files = [{**e, "kind": file_kind(e["name"])} for e in entries if e["type"] == "file"]
        context.update(
            path=listing["path"],
            dirs=[e for e in entries if e["type"] == "dir"],
            files=files[:FILES_SHOWN],
            files_hidden=max(len(files) - FILES_SHOWN, 0),
            crumbs=breadcrumbs(listing["path"], list(team_roots.for_user(request.user, profile).allowed)
                               if profile else []),
        )
    context["profiles"] = profiles if len(profiles) > 1 else []
    template = "jobs/_folder_listing.html" if request.GET.get("partial") else "jobs/folder_browse.html"
    return render(request, template, context, status=status)


def file_kind(name: str) -> str:
    """"photo", "video" or "other": which glyph a file gets in the listing (the job's own rules)."""
    if is_video_name(name):
        return "video"
    return "photo" if name.lower().endswith(IMAGE_EXTENSIONS) else "other"


def breadcrumbs(path: str, roots: list[str]) -> list[tuple[str, str]]:
    """(label, path) from the allowed root holding `path` down to `path` itself."""
    if not path:
        return []
    root = max((r.rstrip("/") or "/" for r in roots if path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/")),
               key=len, default="")
    if not root:
        return [(path, path)]
    crumbs = [(root, root)]
    current = root
    for part in posixpath.relpath(path, root).split("/"):
        if part in ("", "."):
            continue
        current = posixpath.join(current, part)
        crumbs.append((part, current))
    return crumbs


@login_required
@require_safe
def folder_check(request: HttpRequest) -> JsonResponse:
    """`?path=` a target folder, `?cluster=` a profile slug (none: the first): what it holds, asked
    as the folder is typed or picked on the New job page. `{"ok", "images", "videos", "reachable",
    "summary"}`; the summary is what the page shows next to the field."""
    path = request.GET.get("path", "").strip()
    slug = request.GET.get("cluster", "").strip()
    profiles = browsing.profiles_for(request.user)
    profile = next((p for p in profiles if p.slug == slug), None) if slug else (profiles[0] if profiles else None)
    if profile is None:
        return JsonResponse({"ok": False, "reachable": True, "images": 0, "videos": 0,
                             "summary": _("No cluster is available to you. Ask an admin for a template.")}, status=404)
    if not path:
        return JsonResponse({"ok": False, "reachable": True, "images": 0, "videos": 0, "summary": ""})
    found = count_folder(profile, path, team_roots.for_user(request.user, profile))
    return JsonResponse({"ok": found.ok, "reachable": found.reachable, "images": found.images, "videos": found.videos,
                         "path": found.path, "summary": found.summary()})
