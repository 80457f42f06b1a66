"""What the persistent SSH connection buys: `true` over the pooled connection vs a new one each time.

    .venv/bin/python bench/ssh_reuse.py [N]

Prints (does not assert) the mean wall time per command both ways and their ratio; the target is a
ratio of 0.2 or less. Reads the cluster's SSH files from the same environment variables, with the
same defaults, as scripts/cluster/env.sh.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from cluster import ClusterConfig, SSHRunner


def config() -> ClusterConfig:
    state = os.environ.get("FFP_STATE", "/var/lib/ffportal")
    key = os.environ.get("FFP_SSH_KEY", f"{state}/ssh/id_ed25519")
    known = os.environ.get("FFP_SSH_KNOWN_HOSTS", f"{state}/ssh/known_hosts")
    return ClusterConfig(os.environ.get("FFP_SSH_HOST", "127.0.0.1"),
                         int(os.environ.get("FFP_SSH_PORT", "2222")),
                         os.environ.get("FFP_SSH_USER", "ffportal"),
                         Path(key).read_text(), Path(known).read_text())


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main(n: int = 20) -> None:
    cfg = config()
    pooled = SSHRunner(cfg)
    pooled.run(["true"], check=True)  # connect once, outside the measurement
    reuse = [timed(lambda: pooled.run(["true"], check=True)) for _ in range(n)]
    pooled.close()

    def fresh_once() -> None:
        runner = SSHRunner(cfg)
        try:
            runner.run(["true"], check=True)
        finally:
            runner.close()
    fresh = [timed(fresh_once) for _ in range(n)]

    mean_reuse, mean_fresh = statistics.mean(reuse), statistics.mean(fresh)
    print(f"persistent connection: mean {mean_reuse * 1000:7.1f} ms  (n={n}, "
          f"median {statistics.median(reuse) * 1000:.1f} ms)")
    print(f"new connection each:   mean {mean_fresh * 1000:7.1f} ms  (n={n}, "
          f"median {statistics.median(fresh) * 1000:.1f} ms)")
    print(f"ratio persistent/new:  {mean_reuse / mean_fresh:.3f}  (target <= 0.2)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20)
