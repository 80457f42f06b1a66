"""The Slurm versions the contract suite runs on, each a REAL local cluster: 22.05 on this host
(scripts/cluster/up.sh, one node) and 24.11 and 26.05 in Debian roots beside it
(scripts/cluster/newer.sh, two nodes each: h200 GPUs on the first, a100 on the second).

`site` (tests/e2e/conftest.py) gives a test one of them: its cluster profile and templates, as
`seed_local` made them, and `slurm(...)` to run a Slurm command there as its administrator. The test
ids name the version (`[slurm2411]`), so `-k slurm2411` picks one.
"""
from __future__ import annotations

import dataclasses
import json
import os
import subprocess
from pathlib import Path

import pytest

from jobs.models import ClusterProfile

VERSIONS = ("22.05", "24.11", "26.05")
#: the versions, and 26.05 again with the worker in its Apptainer image (scripts/cluster/worker-image.sh):
#: `@pytest.mark.parametrize("site", WITH_CONTAINER, indirect=True, ids=site_id)` on a test that must
#: also hold in a container (its id: `[slurm2605+apptainer]`)
CONTAINER = "26.05+apptainer"
WITH_CONTAINER = (*VERSIONS, CONTAINER)
REPO = Path(__file__).resolve().parents[2]
STATE = Path(os.environ.get("FFP_STATE", "/var/lib/ffportal"))
NEWER_CLUSTERS = {"24.11": "ffp2411", "26.05": "ffp2605"}


def site_id(version: str) -> str:
    return "slurm" + version.replace(".", "")  # "slurm2605", "slurm2605+apptainer"


@dataclasses.dataclass(frozen=True)
class Site:
    version: str
    profile: ClusterProfile
    gpu: str  # template slug: one GPU a task, two photos a task
    cpu: str  # template slug: no GPU
    nodes: tuple[str, ...]
    container: str = ""  # the templates' container image (its path on the cluster), "" for none

    @property
    def id(self) -> str:
        """Its test id: "slurm2411", "slurm2605+apptainer"."""
        return site_id(CONTAINER if self.container else self.version)

    @property
    def newer(self) -> bool:
        return self.version != "22.05"

    def slurm(self, *argv: str) -> str:
        """A Slurm command run on this cluster as root (its administrator); its output."""
        command = list(argv) if not self.newer else ["bash", str(REPO / "scripts/cluster/newer.sh"), self.version,
                                                     "exec", *argv]
        env = {k: v for k, v in os.environ.items() if k != "SLURM_CONF"}
        r = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
        assert r.returncode == 0, f"{' '.join(argv)} on Slurm {self.version} failed ({r.returncode}): {r.stdout}{r.stderr}"
        return r.stdout

    def newer_sh(self, *args: str) -> str:
        """scripts/cluster/newer.sh VERSION ARGS... (kill-node N, up): a newer cluster only."""
        assert self.newer, "only the newer clusters are started by newer.sh"
        r = subprocess.run(["bash", str(REPO / "scripts/cluster/newer.sh"), self.version, *args], capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"newer.sh {self.version} {' '.join(args)} failed: {r.stdout}{r.stderr}"
        return r.stdout


def site(version: str) -> Site:
    """The cluster of that version, as seed_local made its profile (call after seed_local)."""
    if version == CONTAINER:
        plain = site("26.05")
        image_path = STATE / "clusters" / "images" / f"{NEWER_CLUSTERS[plain.version]}.json"
        if not image_path.exists():
            pytest.fail(f"the worker's container image was not built ({image_path} is missing): `make test` "
                        f"builds it, or run `scripts/cluster/worker-image.sh`", pytrace=False)
        slug = plain.profile.slug
        return dataclasses.replace(plain, gpu=f"apptainer-{slug}", cpu=f"apptainer-cpu-{slug}",
                                   container=json.loads(image_path.read_text())["image"])
    if version == "22.05":
        return Site(version, ClusterProfile.objects.get(slug="local"), "gpu-batch", "cpu-small",
                    (os.uname().nodename.split(".")[0],))
    info_path = STATE / "clusters" / f"{NEWER_CLUSTERS[version]}.json"
    if not info_path.exists():
        pytest.fail(f"the Slurm {version} cluster is not up ({info_path} is missing): `make test` starts it, "
                    f"or run `scripts/cluster/newer.sh {version} up`", pytrace=False)
    info = json.loads(info_path.read_text())
    profile = ClusterProfile.objects.get(slug=info["slug"])
    return Site(version, profile, f"gpu-{info['slug']}", f"cpu-{info['slug']}", tuple(info["nodes"]))
