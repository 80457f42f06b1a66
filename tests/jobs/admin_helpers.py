"""Form data for the admin's change pages, as a browser would post it (tests of the admin)."""
from jobs.models import Template


def template_form(template, **overrides) -> dict:
    data = {"name": template.name, "slug": template.slug, "description": template.description,
            "cluster": template.cluster_id, "partition": template.partition, "gpu_type": template.gpu_type,
            "gpu_count": template.gpu_count, "cpus_per_task": template.cpus_per_task, "mem": template.mem,
            "time_limit": template.time_limit, "chunk_size": template.chunk_size, "array_limit": "",
            "container_image": "", "engine": template.engine, "face_selector": template.face_selector, "qos": "",
            "order": template.order, "is_active": "on"}
    for field in Template._meta.get_fields():  # fields other features add to templates, with their values
        if getattr(field, "editable", False) and field.concrete and not field.many_to_many and field.name not in data \
                and field.name != "id":
            value = getattr(template, field.attname)
            data[field.name] = "" if value is None else value
    data.update(overrides)
    return data


def profile_form(profile, **overrides) -> dict:
    data = {"name": profile.name, "slug": profile.slug, "host": profile.host, "port": profile.port,
            "username": profile.username, "private_key": "", "known_hosts": profile.known_hosts,
            "work_root": profile.work_root, "target_roots": '["/srv/ffportal/storage"]', "path_mapping": "[]",
            "worker_python": profile.worker_python, "worker_path": "", "models_dir": "", "is_active": "on",
            "max_targets_per_job": profile.max_targets_per_job, "node_boot_seconds": profile.node_boot_seconds}
    data.update(overrides)
    return data
