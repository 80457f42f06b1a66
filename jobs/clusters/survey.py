"""What a cluster offers right now: partitions, GPU types, free GPUs. Read over SSH for the admin.

Two admin features use it: a cluster profile's "Test connection" action, and the template form's
check that its partition and GPU type exist. One round trip (`run_batch`) runs `sinfo --json`
(nodes: partitions, gres, gres in use) and `scontrol show partition --oneliner` (every partition,
also one without nodes, with its state and time limit); parsing is `cluster`'s pure functions.

Errors are `cluster.ClusterError`s whose messages already say what went wrong in plain words
(host key rejected, key refused, unreachable); `plain_error` adds which one it was.
"""
from __future__ import annotations

import dataclasses

from django.utils.translation import gettext as _

from cluster import (
    AuthenticationFailed,
    ClusterError,
    ClusterUnreachable,
    HostKeyRejected,
    SlurmError,
    SlurmNode,
    SlurmPartition,
    SSHRunner,
    get_runner,
    parse_scontrol_partitions,
    parse_sinfo,
    scontrol_partitions_argv,
    sinfo_argv,
)

#: seconds the admin waits for a cluster before saying it did not answer (a request is waiting)
ADMIN_CONNECT_TIMEOUT = 8.0
ADMIN_COMMAND_TIMEOUT = 20.0


@dataclasses.dataclass(frozen=True)
class PartitionSummary:
    name: str
    state: str  # "UP", "DOWN", ... ("" when scontrol did not answer)
    is_default: bool
    max_time: str
    nodes: list[str]
    gpu_types: list[str]
    gpus_total: int
    gpus_free: int


@dataclasses.dataclass(frozen=True)
class ClusterSurvey:
    nodes: list[SlurmNode]
    partitions: list[SlurmPartition]  # empty when scontrol failed: then known from the nodes only

    def partition_names(self) -> list[str]:
        names = [p.name for p in self.partitions]
        for node in self.nodes:
            names += [p for p in node.partitions if p not in names]
        return names

    def nodes_in(self, partition: str) -> list[SlurmNode]:
        return [n for n in self.nodes if partition in n.partitions]

    def gpu_types_in(self, partition: str) -> list[str]:
        types: list[str] = []
        for node in self.nodes_in(partition):
            types += [t for t in node.gpu_types if t not in types]
        return types

    def summary(self) -> list[PartitionSummary]:
        """One row per partition, in scontrol's order, for the admin page."""
        by_name = {p.name: p for p in self.partitions}
        rows = []
        for name in self.partition_names():
            nodes = self.nodes_in(name)
            p = by_name.get(name)
            rows.append(PartitionSummary(
                name=name, state=p.state if p else "", is_default=bool(p and p.is_default),
                max_time=p.max_time if p else "", nodes=[n.name for n in nodes], gpu_types=self.gpu_types_in(name),
                gpus_total=sum(n.gpus for n in nodes), gpus_free=sum(n.gpus_free for n in nodes)))
        return rows

    def placement_problems(self, partition: str, gpu_type: str, gpu_count: int) -> dict[str, str]:
        """Why a template's tasks could never be placed here, by form field ({} when they can)."""
        names = self.partition_names()
        if partition not in names:
            return {"partition": _("The cluster has no partition %(partition)s; it has: %(names)s.")
                    % {"partition": partition, "names": ", ".join(names) or _("none")}}
        if not gpu_count:
            return {}
        nodes = self.nodes_in(partition)
        if gpu_type:
            nodes = [n for n in nodes if gpu_type in n.gpu_types]
            if not nodes:
                found = self.gpu_types_in(partition)
                return {"gpu_type": _("No node of partition %(partition)s has %(type)s GPUs; its GPU types: %(found)s.")
                        % {"partition": partition, "type": gpu_type,
                           "found": ", ".join(found) if found else _("none (it has no GPUs)")}}
        most = max((n.gpus for n in nodes), default=0)
        if gpu_count > most:
            return {"gpu_count": _("%(count)d GPUs per task, but the nodes of partition %(partition)s have at most "
                                   "%(most)d each.") % {"count": gpu_count, "partition": partition, "most": most}}
        return {}


def survey(runner) -> ClusterSurvey:
    """Ask the cluster behind `runner` what it has (one SSH round trip)."""
    sinfo_res, scontrol_res = runner.run_batch([sinfo_argv(), scontrol_partitions_argv()],
                                               timeout=ADMIN_COMMAND_TIMEOUT)
    if sinfo_res.rc != 0:
        last = (sinfo_res.stderr.strip().splitlines() or ["(no error output)"])[-1]
        raise SlurmError(f"the cluster answered, but `sinfo --json` failed (exit status {sinfo_res.rc}): {last}")
    partitions = parse_scontrol_partitions(scontrol_res.stdout) if scontrol_res.rc == 0 else []
    return ClusterSurvey(nodes=parse_sinfo(sinfo_res.stdout), partitions=partitions)


def admin_config(profile):
    """The profile's connection settings with the admin's shorter connect timeout."""
    return dataclasses.replace(profile.cluster_config(), connect_timeout=ADMIN_CONNECT_TIMEOUT)


def survey_profile(profile, fresh: bool = False) -> ClusterSurvey:
    """Survey the profile's cluster. `fresh`: on a new connection, closed afterwards, so the host
    key, the login and the network are really tested now (the pooled connection may predate a
    change on either side). Otherwise the process's pooled connection is reused."""
    config = admin_config(profile)
    if not fresh:
        return survey(get_runner(config))
    runner = SSHRunner(config)
    try:
        return survey(runner)
    finally:
        runner.close()


def plain_error(exc: ClusterError) -> tuple[str, str]:
    """(what kind of failure, in a few words; the error's own message) for the admin page."""
    if isinstance(exc, HostKeyRejected):
        kind = _("Host key rejected")
    elif isinstance(exc, AuthenticationFailed):
        kind = _("Authentication failed")
    elif isinstance(exc, ClusterUnreachable):
        kind = _("Cluster unreachable")
    elif isinstance(exc, SlurmError):
        kind = _("Slurm did not answer properly")
    else:
        kind = _("Cluster error")
    return kind, str(exc)
