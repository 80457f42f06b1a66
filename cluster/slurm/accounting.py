"""`sacct` only for the jobs that need it: one command for the watcher's batch, and its parser.

`sacct` costs a slurmdbd query (~0.36 s on the local cluster, whatever the number of jobs), but the
watcher needs it only for a task that has LEFT the queue: how it ended, and whether Slurm still
knows the job at all. So, in the same exec as the watcher's own `squeue`, this command asks
`squeue` (plain text, which honours --jobs) which of the tasks the portal expects are still queued
or running, and runs `sacct --json` and the exit-code `sacct` only for the jobs with a task that is
not. The decision is made on the cluster, in the one round trip, from what the portal stored: a
restarted watcher asks the same question and gets the same answer, and nothing is remembered in
between.

`every_job` asks `sacct` for every job whatever the queue says (the watcher's slower beat: a task
Slurm requeued after the portal recorded its end shows only there).

    accounting_when_needed_argv({"33": [0, 2], "34": []}, mark)  ->  ["sh", "-c", SCRIPT, ...]
    parse_accounting_when_needed(stdout, mark)                  ->  AccountingAnswer

Output of the command, each marker line starting with `mark` (a random token chosen per call by
the caller; sacct's JSON cannot contain a raw newline, so no line of it can start with a marker):

    MARK:asked:33,34          the jobs sacct was asked about (empty: sacct did not run)
    ...sacct --json...
    MARK:sacct:RC
    ...sacct -P JobIDRaw|ExitCode...
    MARK:codes:RC

Every value on the command line is a checked job id, a number range, or fixed text; the runner
quotes each argument (`shlex.join`), and the script only ever expands them inside double quotes.
"""
from __future__ import annotations

import dataclasses
import re
import shlex

from ..errors import SlurmError
from ..sbatch import compress_ranges
from .commands import checked_job_ids, sacct_argv, sacct_exit_codes_argv

#: squeue states in which a task is still in the queue and sacct has nothing newer to say.
#: COMPLETING is left out on purpose: such a task has ended, and sacct says how.
STILL_QUEUED_STATES = ("PENDING", "RUNNING", "CONFIGURING", "SUSPENDED")

_MARK = re.compile(r"^[0-9a-f]{8,64}$")

# Reads squeue's "JOB_INDEX" lines on stdin; `want` is "33:0-1,4 34:" (a job's ids and the ranges
# of its tasks expected in the queue). Prints the jobs, comma-separated, with an expected task
# missing from the queue: those sacct must be asked about.
# POSIX awk only (mawk, busybox): no length(array), no gawk extensions.
_AWK = r"""
BEGIN {
    n = split(want, jobs, " ")
    for (i = 1; i <= n; i++) {
        split(jobs[i], part, ":")
        id[i] = part[1]
        m = split(part[2], ranges, ",")
        for (j = 1; j <= m; j++) {
            if (split(ranges[j], ends, "-") == 1) ends[2] = ends[1]
            for (k = ends[1] + 0; k <= ends[2] + 0; k++) expected[part[1] "_" k] = part[1]
        }
    }
}
{ delete expected[$1] }
END {
    for (t in expected) left[expected[t]] = 1
    out = ""
    for (i = 1; i <= n; i++) if (id[i] in left) out = out (out == "" ? "" : ",") id[i]
    print out
}
"""

# $1 mark, $2 every job id (comma-separated), $3 the awk `want`, $4 1: sacct for every job, $5 the awk program.
# A failing squeue (slurmctld restarting, a single purged job id) lists nothing: every expected
# task then counts as gone and sacct is asked, which is only slower, never wrong.
_SCRIPT = f"""
mark=$1 jobs=$2 want=$3 every=$4 prog=$5
if [ "$every" = 1 ]; then
    asked=$jobs
else
    asked=$(squeue --noheader --array --format=%i --states={",".join(STILL_QUEUED_STATES)} --jobs="$jobs" \\
            | awk -v want="$want" "$prog")
fi
printf '%s:asked:%s\\n' "$mark" "$asked"
[ -n "$asked" ] || exit 0
{shlex.join(sacct_argv(["0"])[:-1])} --jobs="$asked"
printf '\\n%s:sacct:%s\\n' "$mark" "$?"
{shlex.join(sacct_exit_codes_argv(["0"])[:-1])} --jobs="$asked"
printf '\\n%s:codes:%s\\n' "$mark" "$?"
"""


def accounting_when_needed_argv(expected: dict[str, list[int]], mark: str, every_job: bool = False) -> list[str]:
    """The command for the watcher's batch: `squeue` text, then `sacct` only where needed.

    `expected`: for every active Slurm job id, the array indexes the portal believes are still
    queued or running (an empty list for a job whose tasks all ended). `mark`: 8-64 lowercase hex
    characters, fresh per call, passed again to `parse_accounting_when_needed`.
    """
    if not expected:
        raise ValueError("accounting_when_needed_argv needs at least one job id")
    if not _MARK.fullmatch(mark):
        raise ValueError(f"the mark must be 8-64 lowercase hex characters: {mark!r}")
    ids = checked_job_ids(sorted(expected))
    if any("_" in job_id for job_id in ids):
        raise ValueError(f"expected whole jobs (123), not tasks (123_4): {ids!r}")
    want = " ".join(f"{job_id}:{compress_ranges(expected[job_id]) if expected[job_id] else ''}" for job_id in ids)
    return ["sh", "-c", _SCRIPT, "sh", mark, ",".join(ids), want, "1" if every_job else "0", _AWK]


@dataclasses.dataclass(frozen=True)
class AccountingAnswer:
    """What the command printed. `asked` empty: sacct did not run (every expected task is queued)."""

    asked: tuple[str, ...] = ()
    sacct_rc: int | None = None
    sacct_json: str = ""
    codes_rc: int | None = None
    codes: str = ""


def parse_accounting_when_needed(text: str, mark: str) -> AccountingAnswer:
    """The parts of the command's stdout. Raises SlurmError when the markers are not all there
    (the shell was killed, or the login shell is not POSIX)."""
    if not _MARK.fullmatch(mark):
        raise ValueError(f"the mark must be 8-64 lowercase hex characters: {mark!r}")
    head = re.match(rf"{mark}:asked:([0-9,]*)\n", text or "")
    if head is None:
        raise SlurmError("the accounting query printed no list of jobs (was it cut short?)")
    asked = tuple(a for a in head.group(1).split(",") if a)
    if not asked:
        return AccountingAnswer()
    rest = text[head.end():]
    sacct = re.search(rf"\n{mark}:sacct:(\d+)\n", rest)
    codes = re.search(rf"\n{mark}:codes:(\d+)\n", rest[sacct.end():]) if sacct else None
    if sacct is None or codes is None:
        raise SlurmError(f"the accounting query of jobs {','.join(asked)} was cut short")
    after = rest[sacct.end():]
    return AccountingAnswer(asked=asked, sacct_rc=int(sacct.group(1)), sacct_json=rest[:sacct.start()],
                            codes_rc=int(codes.group(1)), codes=after[:codes.start()])
