"""`manage.py seed_local`: the local cluster profile, two templates, a demo account and two teams
with a folder each.

Every sample template and cluster has an English and a Simplified Chinese name, and a card
description in plain words for someone who has never seen a cluster: what it is for, never how
Slurm runs it, and nothing about speed (the cards show measured speed once there is some).

Reads the same environment as scripts/cluster/env.sh (FFP_*), so the profile matches what
scripts/cluster/up.sh started: its SSH key (stored encrypted, as every profile's: jobs.secrets) and
the pinned host key line. Safe to run again: it updates the rows in place and never resets the
demo password once set.
"""
import json
import os
import posixpath
import secrets
from pathlib import Path

from django.contrib.auth.models import Group, User
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

import cluster
from jobs.models import ClusterProfile, Team, Template


def env(name: str, default: str) -> str:
    return os.environ.get(name, default)


class Command(BaseCommand):
    help = "Create or update the local cluster profile, two templates and the demo user."

    def add_arguments(self, parser):
        parser.add_argument("--demo-user", default="demo")
        parser.add_argument("--demo-password", default=None, help="default: a random one, printed")

    def handle(self, *args, **opts):
        if opts["demo_password"] is not None:  # checked before anything is written, as the admin would
            name = opts["demo_user"]
            try:
                validate_password(opts["demo_password"], User(username=name, email=f"{name}@localhost"))
            except ValidationError as exc:
                raise CommandError("--demo-password: " + " ".join(exc.messages)) from None
        repo = Path(__file__).resolve().parents[3]
        state = Path(env("FFP_STATE", "/var/lib/ffportal"))
        key_path = Path(env("FFP_SSH_KEY", str(state / "ssh" / "id_ed25519")))
        kh_path = Path(env("FFP_SSH_KNOWN_HOSTS", str(state / "ssh" / "known_hosts")))
        if not key_path.exists() or not kh_path.exists():
            raise CommandError(f"{key_path} or {kh_path} is missing: run scripts/cluster/up.sh first")
        storage = env("FFP_STORAGE", "/srv/ffportal/storage")

        def seed_profile(slug, name, name_zh, port, known_hosts: Path, work_root):
            return ClusterProfile.objects.update_or_create(
                slug=slug,
                defaults=dict(
                    name=name, name_zh=name_zh, host=env("FFP_SSH_HOST", "127.0.0.1"), port=int(port),
                    username=env("FFP_SSH_USER", "ffportal"), private_key=key_path.read_text(),
                    known_hosts=known_hosts.read_text().strip(), work_root=work_root,
                    target_roots=[storage], path_mapping=[[storage, storage]], worker_python=env("FFP_PYTHON", str(repo / ".venv" / "bin" / "python")),
                    worker_path=str(repo), is_active=True,
                ),
            )[0]

        profile = seed_profile("local", "Local cluster", "本地集群", env("FFP_SSH_PORT", "2222"), kh_path,
                               env("FFP_WORK", "/srv/ffportal/work"))
        gres = env("FFP_GPU_GRES", "gpu:h200")
        gpu_type = gres.split(":")[1] if gres.count(":") >= 1 else ""
        Template.objects.update_or_create(slug="gpu-batch", defaults=dict(
            name="GPU batch", name_zh="GPU（显卡）处理", cluster=profile, partition=env("FFP_GPU_PARTITION", "gpu"), gpu_type=gpu_type,
            gpu_count=1, cpus_per_task=1, mem="2G", time_limit="00:20:00", chunk_size=2, engine="auto",
            face_selector="many", order=1, is_active=True,
            description="Uses a graphics card (GPU), with the better face models where the cluster has them. "
                        "The time it runs counts towards your monthly GPU time.",
            description_zh="使用显卡（GPU）处理；集群装有更好的人脸模型时会用上它们。运行时间计入您每月的 GPU 用量。"))
        Template.objects.update_or_create(slug="cpu-small", defaults=dict(
            name="CPU, small jobs", name_zh="CPU 处理，适合少量文件", cluster=profile, partition=env("FFP_CPU_PARTITION", "cpu"), gpu_type="",
            gpu_count=0, cpus_per_task=1, mem="2G", time_limit="00:30:00", chunk_size=5, engine="classic",
            face_selector="many", order=2, is_active=True,
            description="Works without a graphics card, so it uses none of your monthly GPU time. Good for a "
                        "handful of photos; slower on big photos and videos.",
            description_zh="无需显卡，不占用您每月的 GPU 用量。适合处理少量照片；照片很大或是视频时会比较慢。"))
        # The second local cluster (scripts/cluster/second.sh), once it has been started: another
        # profile, reached through its own sshd, and a template for the GPU type only it has.
        kh_second = Path(env("FFP_SECOND_SSH_KNOWN_HOSTS", str(state / "ssh" / "known_hosts-second")))
        if env("FFP_SECOND", "1") != "0" and kh_second.exists():
            second = seed_profile("second", "Second cluster", "第二集群", env("FFP_SECOND_SSH_PORT", "2223"), kh_second,
                                  env("FFP_SECOND_WORK", "/srv/ffportal/work-second"))
            gres = env("FFP_SECOND_GPU_GRES", "gpu:a100")
            Template.objects.update_or_create(slug="gpu-second", defaults=dict(
                name="A100s of the second cluster", name_zh="第二集群的 A100 显卡", cluster=second, partition=env("FFP_GPU_PARTITION", "gpu"),
                gpu_type=gres.split(":")[1] if gres.count(":") >= 1 else "", gpu_count=1, cpus_per_task=1,
                mem="1G", time_limit="00:20:00", chunk_size=2, engine="auto", face_selector="many", order=3,
                is_active=True,
                description="Uses an NVIDIA A100 graphics card (GPU) on the second cluster: a choice for when "
                            "the first one is busy. The time it runs counts towards your monthly GPU time.",
                description_zh="使用第二集群的 NVIDIA A100 显卡（GPU），第一个集群繁忙时可以选它。运行时间计入您每月的 GPU 用量。"))

        # The newer clusters (scripts/cluster/newer.sh: Slurm 24.11 and 26.05, two nodes each), those
        # that are up: each describes itself in $FFP_STATE/clusters/<name>.json. A profile each (slug
        # "slurm-24-11"), a GPU template that takes a GPU of either node's type (so work can move to
        # the other node when one fails) and a CPU template ("gpu-slurm-24-11", "cpu-slurm-24-11").
        for info_path in sorted((state / "clusters").glob("*.json")):
            info = json.loads(info_path.read_text())
            slug, version = info["slug"], info["version"]
            newer = seed_profile(slug, f"Slurm {version} cluster", f"{version} 版测试集群", info["ssh_port"], Path(info["known_hosts"]),
                                 info["work_root"])
            # Its nodes wake in seconds (newer.sh's stand-in BMC), not a real machine's minutes.
            ClusterProfile.objects.filter(pk=newer.pk).update(node_boot_seconds=info.get("boot_seconds", 120))
            Template.objects.update_or_create(slug=f"gpu-{slug}", defaults=dict(
                name=f"GPU on Slurm {version}", name_zh=f"{version} 版测试集群上的 GPU", cluster=newer, partition=env("FFP_GPU_PARTITION", "gpu"),
                gpu_type="", gpu_count=1, cpus_per_task=1, mem="1G", time_limit="00:20:00", chunk_size=2,
                engine="auto", face_selector="many", order=10, is_active=True,
                description=f"Uses a graphics card (GPU) on the Slurm {version} test cluster. If one of its two "
                            f"computers stops, the work carries on on the other.",
                description_zh=f"使用 {version} 版测试集群上的显卡（GPU）。它的两台计算机中有一台停止工作时，"
                               f"任务会在另一台上继续。"))
            Template.objects.update_or_create(slug=f"cpu-{slug}", defaults=dict(
                name=f"CPU on Slurm {version}", name_zh=f"{version} 版测试集群上的 CPU", cluster=newer, partition=env("FFP_CPU_PARTITION", "cpu"),
                gpu_type="", gpu_count=0, cpus_per_task=1, mem="1G", time_limit="00:30:00", chunk_size=5,
                engine="classic", face_selector="many", order=11, is_active=True,
                description=f"Works without a graphics card, on the Slurm {version} test cluster. Uses none of "
                            f"your monthly GPU time.",
                description_zh=f"无需显卡，在 {version} 版测试集群上处理，不占用您每月的 GPU 用量。"))
            # The worker's container image, where scripts/cluster/worker-image.sh built one for this
            # cluster: a GPU and a CPU template whose tasks start it with `apptainer exec`
            # ("apptainer-slurm-26-05", "apptainer-cpu-slurm-26-05").
            image_path = state / "clusters" / "images" / info_path.name
            if image_path.exists():
                image = json.loads(image_path.read_text())
                Template.objects.update_or_create(slug=f"apptainer-{slug}", defaults=dict(
                    name=f"GPU in a container on Slurm {version}", name_zh=f"{version} 版测试集群上的 GPU（容器）",
                    cluster=newer,
                    partition=env("FFP_GPU_PARTITION", "gpu"), gpu_type="", gpu_count=1, cpus_per_task=1,
                    mem="1G", time_limit="00:20:00", chunk_size=2, engine="auto", face_selector="many",
                    order=12, is_active=True, container_image=image["image"],
                    description=f"Uses a graphics card (GPU) on the Slurm {version} test cluster, with the "
                                f"face-swap software in a sealed, ready-made package (a container), so every run "
                                f"uses exactly the same version.",
                    description_zh=f"使用 {version} 版测试集群上的显卡（GPU）。换脸软件装在一个封装好的软件包"
                                   f"（容器）里运行，每次运行的版本完全相同。"))
                Template.objects.update_or_create(slug=f"apptainer-cpu-{slug}", defaults=dict(
                    name=f"CPU in a container on Slurm {version}", name_zh=f"{version} 版测试集群上的 CPU（容器）",
                    cluster=newer,
                    partition=env("FFP_CPU_PARTITION", "cpu"), gpu_type="", gpu_count=0, cpus_per_task=1,
                    mem="1G", time_limit="00:30:00", chunk_size=5, engine="classic", face_selector="many",
                    order=13, is_active=True, container_image=image["image"],
                    description=f"Works without a graphics card on the Slurm {version} test cluster, with the "
                                f"face-swap software in a sealed, ready-made package (a container). Uses none "
                                f"of your monthly GPU time.",
                    description_zh=f"无需显卡，在 {version} 版测试集群上处理，换脸软件装在一个封装好的软件包"
                                   f"（容器）里运行。不占用您每月的 GPU 用量。"))

        user, created = User.objects.get_or_create(username=opts["demo_user"])
        password = opts["demo_password"]
        if created or password:
            password = password or secrets.token_urlsafe(9)
            user.set_password(password)
            user.email = user.email or f"{user.username}@localhost"
            user.save()
            self.stdout.write(f"demo account: {user.username} / {password}")
        else:
            self.stdout.write(f"demo account: {user.username} (password unchanged)")
        # Two teams, each its own Slurm account (made on a cluster before its first job there); the
        # demo user is in both, so New job asks which team a job is for. Each team has a lead: the demo
        # user leads VFX (so a newcomer sees the team page), "lin" leads Post; "ana" is a VFX member.
        teams = {}
        for group_name, account in (("VFX", "vfx"), ("Post", "post")):
            group, _new = Group.objects.get_or_create(name=group_name)
            teams[account], _new = Team.objects.get_or_create(group=group, defaults={"slurm_account": account})
            user.groups.add(group)
        teams["vfx"].leads.add(user)
        for name, account, leads in (("lin", "post", True), ("ana", "vfx", False)):
            self.stdout.write(demo_person(name, password, teams[account], leads))
        self.stdout.write("teams: VFX (Slurm account vfx, lead: the demo account), Post (post, lead: lin); "
                          "the demo account is in both")
        self.stdout.write(seed_team_folders(profile, storage, env("FFP_SAMPLE_FACES", storage + "/samples/faces")))
        self.stdout.write(f"cluster profile 'local': {profile.username}@{profile.host}:{profile.port}, "
                          f"sample folder {env('FFP_SAMPLE_FACES', storage + '/samples/faces')}")


def demo_person(name: str, password: str | None, team: Team, lead: bool) -> str:
    """Another demo person in `team` (its lead when `lead`), with the demo password when it is known
    (first run, or --demo-password); never reset otherwise."""
    person, created = User.objects.get_or_create(username=name, defaults={"email": f"{name}@localhost"})
    if created or password:
        person.set_password(password or secrets.token_urlsafe(9))
        person.save()
    person.groups.add(team.group)
    if lead:
        team.leads.add(person)
    role = "lead of" if lead else "member of"
    return f"demo account: {name} ({role} {team.name}), " + ("same password" if password else "password unchanged")


#: the sample photos each demo team's folder starts with (scripts/cluster/up.sh puts them in the samples)
TEAM_SAMPLES = ("t1.jpg", "astronaut.png")

#: `sh -c` SCRIPT samples folder...: each folder made (umask 077 on the cluster: mode 700) and the
#: samples copied in where missing (mode 600), as the service user: theirs to read, nobody else's
_MAKE_TEAM_FOLDERS = r"""samples=$1; shift
for folder; do
  mkdir -p -- "$folder" || exit 1
  for name in %s; do [ -e "$folder/$name" ] || cp -- "$samples/$name" "$folder/$name" || exit 1; done
done""" % " ".join(TEAM_SAMPLES)


def seed_team_folders(profile: ClusterProfile, storage: str, samples: str) -> str:
    """The demo teams' folders (docs/teams.md): `<storage>/teams/<account>` for VFX and Post, set on
    each team that has no folder yet (an admin's choice stays), and made on the local cluster with
    two sample photos, over SSH as the service user, as the portal makes every folder there (one
    command; scripts/cluster/up.sh makes `<storage>/teams` theirs). What was done, in one line; a
    cluster that cannot be reached is said, not fatal."""
    folders = []
    for team in Team.objects.filter(slurm_account__in=("vfx", "post")).order_by("slurm_account"):
        mine = posixpath.join(storage, "teams", team.slurm_account)
        if not team.target_roots:
            team.target_roots = [mine]
            team.save(update_fields=["target_roots"])
        if team.target_roots == [mine]:
            folders.append(mine)
    if not folders:
        return "team folders: as an admin set them"
    try:
        cluster.runner_for(profile).run(["sh", "-c", _MAKE_TEAM_FOLDERS, "sh", samples, *folders], timeout=60,
                                        check=True)
    except cluster.ClusterError as exc:
        return f"team folders {', '.join(folders)}: not made on the cluster ({exc}); make them there by hand"
    return f"team folders: {', '.join(folders)} ({len(TEAM_SAMPLES)} sample photos each)"
