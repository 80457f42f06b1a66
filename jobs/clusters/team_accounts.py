"""A team's Slurm account, made on a cluster before the team's first job there (jobs.models.team).

Asked once per team and cluster (`Team.accounts_made`), on the submission's SSH connection: the
cluster's name and the service user's associations (one round trip); when the team's account is
missing, `sacctmgr add account` and `add user` with the QOS the service user has on its default
account, then asked again. An account made by hand beforehand is simply found.

A cluster that refuses (the service user lacks AdminLevel Operator, or is not a coordinator) fails
the job in plain words, with what an admin has to do: every later job of the team would fail the
same way. A cluster that does not answer is retried like any submission.
"""
from __future__ import annotations

import logging

from django.utils import timezone
from django.utils.translation import gettext as _

from cluster import CommandFailed
from cluster.slurm.accounts import account_state_argv, add_account_argv, add_user_argv, parse_account_state
from jobs.errors import SubmitRejected
from jobs.models import Job, Team

log = logging.getLogger(__name__)

#: seconds sacctmgr may take on a busy slurmdbd
SACCTMGR_TIMEOUT = 60


def ensure_account(runner, job: Job) -> None:
    """Make sure the job's Slurm account (Job.slurm_account) exists on its cluster for the service
    user. Raises SubmitRejected when the cluster refuses, CommandFailed when it fails otherwise."""
    account, profile = job.slurm_account, job.cluster
    if not account:
        return
    team = Team.objects.filter(slurm_account=account).select_related("group").first()
    if team is not None and profile.slug in (team.accounts_made or {}):
        return
    state = _state(runner, profile.username, account)
    if not state.exists:
        description = team.name if team else account
        for argv in (add_account_argv(account, state.cluster, description),
                     add_user_argv(profile.username, account, state.cluster, state.qos, state.default_qos)):
            res = runner.run(argv, timeout=SACCTMGR_TIMEOUT)
            if res.rc != 0 and "already exists" not in (res.stdout + res.stderr):
                _refused(team.name if team else account, res)
        if not _state(runner, profile.username, account).exists:
            raise SubmitRejected(_("The cluster did not set up your team %(team)s. Nothing ran; ask an admin to check "
                                   "the portal's rights on the cluster.") % {"team": team.name if team else account})
        log.info("Slurm account %s made on %s (cluster %s) for %s", account, profile.slug, state.cluster,
                 profile.username)
    if team is not None:
        made = dict(team.accounts_made or {}, **{profile.slug: timezone.now().isoformat()})
        Team.objects.filter(pk=team.pk).update(accounts_made=made)


def _state(runner, user: str, account: str):
    res = runner.run(account_state_argv(user), timeout=SACCTMGR_TIMEOUT)
    if res.rc != 0:
        raise CommandFailed(f"asking the cluster for its Slurm accounts failed (exit status {res.rc}): "
                            f"{res.stderr.strip()[-300:]}", res.rc, res.stderr)
    try:
        return parse_account_state(res.stdout, account)
    except ValueError as exc:
        raise CommandFailed(str(exc), res.rc, res.stderr) from None


def _refused(team: str, res) -> None:
    words = (res.stdout + res.stderr).strip()
    if "permission" in words.lower() or "not allowed" in words.lower() or "denied" in words.lower():
        raise SubmitRejected(_("The cluster does not let the portal set up your team %(team)s there. Nothing ran; "
                               "ask an admin to create the team's account on the cluster, or to give the portal the "
                               "right to.") % {"team": team})
    raise CommandFailed(f"sacctmgr failed on the cluster (exit status {res.rc}): {words[-300:]}", res.rc, res.stderr)
