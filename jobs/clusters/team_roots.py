"""Team folders: which cluster folders a person, or a job, may use on a cluster, and which are refused.

A cluster profile's allowed folders (`ClusterProfile.target_roots`) are everyone's. A team's folders
(`Team.target_roots`, e.g. /data/vfx) are its own: on every cluster,

- a person may use the profile's folders and those of each of their teams (`for_user`: the folder
  browser, the folder check on the New job page);
- a job may use the profile's folders and those of ITS team (`for_job`, `for_team`: Start, the
  listing at submission, the worker's manifest, the results' "before" pictures);
- every other team's folders are refused, even where one lies inside a profile's folder
  (/srv/storage/teams/post inside /srv/storage), and so is everything below them, unless one of the
  allowed folders lies deeper still (`cluster.paths.allows`).

A refused folder is refused exactly like a folder outside: in the same words, before anything is
asked of the cluster, so someone outside the team never learns whether it exists. The paths are
checked by `cluster.paths` (`check_in_roots`, `list_folder_in_roots`: links resolved on the cluster)
and, on the node, by the worker (`worker.targetfile`, the manifest's `refused_roots`).
"""
from __future__ import annotations

from dataclasses import dataclass

from cluster import PathNotAllowed, check_in_roots
from jobs.models import Team


@dataclass(frozen=True)
class Roots:
    """The folders one may use on a cluster (`allowed`: the profile's first) and those refused."""

    allowed: tuple[str, ...]
    refused: tuple[str, ...]

    def allows(self, path: str) -> bool:
        """Whether `path` may be used, by its name alone (links are resolved by `cluster.paths`)."""
        try:
            check_in_roots(path, list(self.allowed), self.refused)
        except PathNotAllowed:
            return False
        return True


def for_user(user, profile) -> Roots:
    """What `user` may browse and check on `profile`: its folders and those of every team of theirs."""
    return _roots(profile, list(Team.objects.of(user)))


def for_team(team: Team | None, profile) -> Roots:
    """What a job for `team` (None: no team) may use on `profile`."""
    return _roots(profile, [team] if team is not None else [])


def for_job(job) -> Roots:
    """What `job` may use: decided by its team (Job.team), on its cluster."""
    return for_team(job.team, job.cluster)


def container_folders(job) -> tuple[str, ...]:
    """The folders a container job sees its targets in: the profile's, and the job's team folder
    that holds its target folder, if one does. Not the team's other folders: a team folder need not
    exist on every cluster, and a container cannot be started with a folder that does not."""
    team = job.team if job.team_id else None
    own = [root for root in (team.target_roots if team and job.target_folder else [])
           if Roots((root,), ()).allows(job.target_folder)]
    return _unique([*(job.cluster.target_roots or []), *own])


def team_holding(user, path: str, profile, but: Team | None) -> Team | None:
    """The first team of `user`'s, other than `but`, whose job could use `path` on `profile` where a
    job for `but` may not: one of that team's folders holds it. Start then says which team to choose."""
    for team in Team.objects.of(user):
        if (but is None or team.pk != but.pk) and team.target_roots and for_team(team, profile).allows(path):
            return team
    return None


def _roots(profile, teams: list[Team]) -> Roots:
    own = {team.pk for team in teams}
    allowed = _unique([*(profile.target_roots or []), *(root for team in teams for root in team.target_roots or [])])
    others = Team.objects.exclude(pk__in=own).order_by("group__name").values_list("target_roots", flat=True)
    return Roots(allowed, _unique(root for roots in others for root in roots or []))


def _unique(folders) -> tuple[str, ...]:
    out: list[str] = []
    for folder in folders:
        if folder not in out:
            out.append(folder)
    return tuple(out)
