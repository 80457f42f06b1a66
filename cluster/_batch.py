"""Framing for `SSHRunner.run_batch`: several commands in one shell line, their outputs cut apart.

Each command runs in its own subshell (so `exit` or `cd` cannot affect the next one) between marker
lines printed to stdout and stderr. Markers carry a random per-call nonce printed as two halves, so
the full marker never appears in the command line itself: a command that prints its own command
line (`ps`, /proc/PID/cmdline) or any other text cannot forge one. The line is built only from
`shlex.join` pieces, fixed separators and those markers.
"""
from __future__ import annotations

import re
import shlex

from .errors import ClusterError


def batch_line(command_lines: list[str], nonce: str) -> str:
    """One POSIX shell line running the already `shlex.join`ed commands in order."""
    a, b = nonce[: len(nonce) // 2], nonce[len(nonce) // 2:]
    parts = []
    for i, line in enumerate(command_lines):
        start = shlex.join(["printf", "%s%s:%d:start\\n", a, b, str(i)])
        parts += [
            start,
            start + " >&2",
            "( " + line + " )",
            shlex.join(["printf", "\\n%s%s:%d:rc:%d\\n", a, b, str(i)]) + ' "$?"',
            shlex.join(["printf", "\\n%s%s:%d:end\\n", a, b, str(i)]) + " >&2",
        ]
    return "; ".join(parts)


def _between(data: bytes, start: bytes, end: re.Pattern):
    """The bytes between the marker line `start` and the first `end` match after it, and the match."""
    begin = data.find(start)
    if begin < 0:
        return None
    begin += len(start)
    match = end.search(data, begin)
    return (data[begin:match.start()], match) if match else None


def split_batch(count: int, nonce: str, rc: int, out: bytes, err: bytes) -> list[tuple[int, str, str]]:
    """(exit status, stdout, stderr) of each of the `count` commands of a `batch_line`."""
    n = re.escape(nonce.encode())
    results = []
    for i in range(count):
        start = nonce.encode() + b":%d:start\n" % i
        so = _between(out, start, re.compile(rb"\n" + n + rb":%d:rc:(\d+)\n" % i))
        se = _between(err, start, re.compile(rb"\n" + n + rb":%d:end\n" % i))
        if so is None or se is None:
            raise ClusterError(
                f"could not split the output of a command batch (shell exit status {rc}); is the "
                f"service user's login shell POSIX? Stderr: {err.decode(errors='replace')[-300:]}")
        (stdout, match), (stderr, _) = so, se
        results.append((int(match.group(1)), stdout.decode(errors="replace"),
                        stderr.decode(errors="replace")))
    return results
