"""A team's Slurm account: made once per cluster, so that its jobs carry it (`sbatch --account`)
and Slurm's fair share and accounting (`sacct --accounts`) see teams, not one portal user.

Pure functions: the argument lists and the parsing. The portal submits as ONE Slurm user (the
service user it logs in as); each team is an account that user is associated with, with the same
QOS levels the user has on its default account (without them, `AccountingStorageEnforce=qos`
refuses every job of the team). Creating accounts and associations needs AdminLevel Operator (or
a coordinator of the parent account), which bookings already ask for (docs/slurm-bookings.md).

    account_state_argv("ffportal")             ->  ["sh", "-c", SCRIPT, "sh", "ffportal"]
    parse_account_state(stdout, "vfx")         ->  AccountState(cluster, exists, qos, default_qos, ...)
    add_account_argv("vfx", "ffportal", "Team vfx")  ->  ["sacctmgr", "-i", "add", "account", ...]
    add_user_argv("ffportal", "vfx", "ffportal", "high,normal", "normal")  ->  [...]

22.05 to 26.05 print `sacctmgr -n -P show assoc` the same way: one `cluster|account|user|qos|defqos`
line per association; the QOS list sorted by name.
"""
from __future__ import annotations

import dataclasses

from cluster.resources import validate_slurm_name

#: Slurm keeps account names lower case (sacctmgr lowers them); the portal asks for them so
ACCOUNT_MAX = 30

# One round trip: the cluster's own name (sacctmgr acts on every cluster of the database unless
# told which), then the service user's associations there. "#" lines are the script's own.
_STATE_SCRIPT = r"""
name=$(scontrol show config | sed -n 's/^ClusterName *= *//p' | head -n1)
echo "#cluster|$name"
echo "#default|$(sacctmgr -n -P show user "$1" format=defaultaccount | head -n1)"
sacctmgr -n -P show assoc where cluster="$name" user="$1" format=cluster,account,user,qos,defaultqos
"""


@dataclasses.dataclass(frozen=True)
class AccountState:
    """What the cluster says of the service user and one team account."""

    cluster: str  # ClusterName
    exists: bool  # the user is associated with the account on this cluster
    qos: str  # the QOS the user has on its default account (what the team's association gets too)
    default_qos: str
    default_account: str


def _name_value(what: str, value: str) -> str:
    # sacctmgr splits its values on commas and spaces; a newline would end up in its query
    if not value or any(c in value for c in ", \n\r\0\t"):
        raise ValueError(f"{what} must be non-empty, without commas, spaces or newlines: {value!r}")
    return value


def checked_account(name: str) -> str:
    """A team's account name as Slurm keeps it: lower case, at most ACCOUNT_MAX, letters, digits, _ . -"""
    validate_slurm_name("account", name)
    if name != name.lower() or len(name) > ACCOUNT_MAX:
        raise ValueError(f"account {name!r} must be lower case and at most {ACCOUNT_MAX} characters")
    if not name.strip("."):  # it names the team's folder of job folders too (<work root>/teams/<account>)
        raise ValueError(f"account {name!r} must not be dots only")
    return name


def account_state_argv(user: str) -> list[str]:
    """The cluster's name and the service user's associations on it (`parse_account_state`)."""
    _name_value("user", user)
    return ["sh", "-c", _STATE_SCRIPT, "sh", user]


def parse_account_state(stdout: str, account: str) -> AccountState:
    cluster = default_account = ""
    rows = []
    for line in stdout.splitlines():
        if line.startswith("#cluster|"):
            cluster = line.split("|", 1)[1].strip()
        elif line.startswith("#default|"):
            default_account = line.split("|", 1)[1].strip()
        elif line.count("|") >= 4:
            rows.append(line.split("|"))
    if not cluster:
        raise ValueError("the cluster did not say its name (scontrol show config: ClusterName)")
    own = {r[1]: r for r in rows}
    base = own.get(default_account) or (rows[0] if rows else None)
    return AccountState(cluster=cluster, exists=account in own, qos=base[3] if base else "",
                        default_qos=base[4] if base else "", default_account=default_account)


def add_account_argv(account: str, cluster: str, description: str) -> list[str]:
    """`sacctmgr -i add account` on that cluster only. The description is the team's name."""
    checked_account(account)
    _name_value("cluster", cluster)
    text = " ".join(description.split())[:100].replace('"', "'") or account
    return ["sacctmgr", "-i", "add", "account", account, f"cluster={cluster}", f"description={text}",
            "organization=ffportal"]


def add_user_argv(user: str, account: str, cluster: str, qos: str = "", default_qos: str = "") -> list[str]:
    """Associate the service user with the team's account on that cluster, with these QOS."""
    checked_account(account)
    _name_value("user", user)
    _name_value("cluster", cluster)
    argv = ["sacctmgr", "-i", "add", "user", user, f"account={account}", f"cluster={cluster}"]
    if qos:
        for name in qos.split(","):
            validate_slurm_name("QOS", name)
        argv.append(f"qos={qos}")
    if default_qos:
        validate_slurm_name("QOS", default_qos)
        argv.append(f"defaultqos={default_qos}")
    return argv
