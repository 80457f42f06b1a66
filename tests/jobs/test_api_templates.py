"""GET /api/v1/templates: the templates the caller may use, as cards."""
import pytest
from django.contrib.auth.models import Group

from jobs.models import ClusterProfile, Template

from .api_helpers import token_client

CARD_KEYS = {"slug", "name", "description", "cluster", "partition", "gres", "time_limit", "chunk_size", "engine",
             "name_zh", "description_zh"}  # the admin's Chinese words (issue 27), "" when none


@pytest.fixture
def catalogue(template, team, profile):
    """quick-gpu: open to all; team-only: the owner's group; other-team: another group; off: inactive."""
    Template.objects.create(name="Team only", slug="team-only", cluster=profile, partition="gpu").groups.add(team)
    other = Group.objects.create(name="animation")
    Template.objects.create(name="Other team", slug="other-team", cluster=profile, partition="gpu").groups.add(other)
    Template.objects.create(name="Off", slug="off", cluster=profile, partition="gpu", is_active=False)
    parked = ClusterProfile.objects.create(name="Parked", slug="parked", host="h", username="u", private_key="k",
                                           known_hosts="k", work_root="/w", is_active=False)
    Template.objects.create(name="On a parked cluster", slug="parked-tpl", cluster=parked, partition="gpu")


def slugs(user):
    r = token_client(user)[0].get("/api/v1/templates")
    assert r.status_code == 200
    return sorted(t["slug"] for t in r.json())


def test_it_lists_templates_as_cards(owner, catalogue):
    body = token_client(owner)[0].get("/api/v1/templates").json()
    quick = next(t for t in body if t["slug"] == "quick-gpu")
    assert set(quick) == CARD_KEYS
    assert quick == {"slug": "quick-gpu", "name": "Quick GPU", "description": "One GPU, ten images per task.",
                     "name_zh": "", "description_zh": "",
                     "cluster": "local", "partition": "gpu", "gres": "gpu:h200:1", "time_limit": "00:10:00",
                     "chunk_size": 2, "engine": "classic"}


def test_it_lists_only_templates_of_the_users_groups(owner, colleague, stranger, staff, catalogue):
    assert slugs(owner) == slugs(colleague) == ["quick-gpu", "team-only"]
    assert slugs(stranger) == ["quick-gpu"]
    assert slugs(staff) == ["other-team", "quick-gpu", "team-only"]  # a superuser holds jobs.use_any_template


def test_the_staff_flag_alone_opens_no_template_the_permission_does(stranger, catalogue):
    from django.contrib.auth.models import Permission, User

    def start_refusal(user) -> str:  # Start checks the template first (jobs.job.start: usable_by)
        r = token_client(user)[0].post("/api/v1/jobs", {"template": "other-team", "consent": "true",
                                                         "target_folder": "/srv/ffportal/storage"})
        assert r.status_code == 400
        return r.json()["field"]

    clerk = User.objects.create_user("clerk", "clerk@example.org", "clerk-pass-123", is_staff=True)
    assert slugs(clerk) == ["quick-gpu"] and start_refusal(clerk) == "template"
    stranger.user_permissions.add(Permission.objects.get(content_type__app_label="jobs", codename="use_any_template"))
    stranger = User.objects.get(pk=stranger.pk)  # permissions are cached on the instance
    assert slugs(stranger) == ["other-team", "quick-gpu", "team-only"]
    assert start_refusal(stranger) == "source"  # the template passed; only the missing face photo is left
