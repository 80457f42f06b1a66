"""Model sets: model files on the cluster's shared storage, identified by their SHA-256.

An admin lists a folder and the hash of each file in it; a template pinned to the set sends both
with every job (`worker.modelset.ModelPin` in the manifest), and the worker refuses a file whose
hash differs. A new version of the models is a new folder and a new set: pointing the template at
it changes what the NEXT jobs use (the snapshot taken at Start keeps running jobs on theirs), and
nothing has to be restarted.
"""
from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils.translation import gettext_lazy as _

from worker.modelset import file_entry_problem


class ModelSet(models.Model):
    name = models.CharField(_("name"), max_length=100, unique=True,
                            help_text=_("A name that says which version this is, e.g. inswapper 2026-11."))
    folder = models.CharField(
        _("folder on the cluster"), max_length=500,
        help_text=_("Absolute folder on the cluster's shared storage that holds these model files."))
    files = models.JSONField(
        _("files"), default=list,
        help_text=_('Each file and its SHA-256, e.g. [{"name": "inswapper_128.onnx", "sha256": "e4a3…"}]. '
                    "A task refuses a file whose hash differs."))
    description = models.TextField(_("description"), blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "name"]
        verbose_name = _("model set")
        verbose_name_plural = _("model sets")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        errors = {}
        # ':' and ',' would break a container's bind list (cluster.sbatch), where the folder also goes.
        if not self.folder.startswith("/") or any(c in self.folder for c in "\x00\n:,"):
            errors["folder"] = _("Give the folder as an absolute path on the cluster, starting with /, "
                                 "without : or , in it.")
        if not isinstance(self.files, list) or not self.files:
            errors["files"] = _("List at least one file with its SHA-256.")
        else:
            for i, entry in enumerate(self.files, start=1):
                if not isinstance(entry, dict) or set(entry) != {"name", "sha256"}:
                    errors["files"] = _("File %(n)s must have exactly a name and a sha256.") % {"n": i}
                    break
                if file_entry_problem(entry["name"], entry["sha256"]).startswith("the name"):
                    errors["files"] = _("File %(n)s: the name must be a plain file name, without folders.") % {"n": i}
                    break
                if file_entry_problem(entry["name"], entry["sha256"]):
                    errors["files"] = _("File %(n)s: the SHA-256 must be 64 hexadecimal digits.") % {"n": i}
                    break
            names = [e.get("name") for e in self.files if isinstance(e, dict)]
            if "files" not in errors and len(set(names)) != len(names):
                errors["files"] = _("Each file may be listed once.")
        if errors:
            raise ValidationError(errors)

    def pin(self) -> dict:
        """The set as a job's snapshot keeps it and the manifest carries it (`worker.modelset.ModelPin`)."""
        return {"set": self.name, "folder": self.folder,
                "files": [{"name": e["name"], "sha256": e["sha256"].lower()} for e in self.files]}
