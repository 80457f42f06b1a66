"""A cluster profile's folders must be bindable into a container (Apptainer's --bind list separates
folders with ':' and ','): the admin is told at once, not the first user whose job would fail."""
import pytest
from django.core.exceptions import ValidationError
from django.utils import translation

from jobs.models import ClusterProfile

pytestmark = pytest.mark.django_db


def profile(**fields) -> ClusterProfile:
    base = dict(slug="site", name="Site", host="login.example", username="ffp", private_key="k",
                known_hosts="login.example ssh-ed25519 AAAA", work_root="/work", target_roots=["/srv/storage"])
    return ClusterProfile(**{**base, **fields})


@pytest.mark.parametrize("fields, field", [
    (dict(target_roots=["/srv/storage", "/srv/a:b"]), "target_roots"),
    (dict(target_roots=["/srv/shoot,2026"]), "target_roots"),
    (dict(models_dir="/srv/models:ro"), "models_dir"),
])
def test_a_folder_with_a_separator_is_refused_in_plain_words(fields, field):
    with pytest.raises(ValidationError) as refused:
        profile(**fields).full_clean(exclude=["slurm_release"])
    words = " ".join(refused.value.message_dict[field])
    assert "may not contain ':' or ','" in words
    with translation.override("zh-hans"), pytest.raises(ValidationError) as refused:
        profile(**fields).full_clean(exclude=["slurm_release"])
    assert "不能含有" in " ".join(refused.value.message_dict[field])


def test_plain_folders_are_accepted():
    profile(models_dir="/srv/models", target_roots=["/srv/storage", "/mnt/shoot 2026"]).full_clean(
        exclude=["slurm_release"])
