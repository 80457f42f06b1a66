"""The face-fusion worker: runs on compute nodes inside each Slurm array task. Never imports Django.

Entry points: `python -m worker run --manifest M [--task-index N]`, `python -m worker swap ...`,
`python -m worker models check|fetch`. Formats other programs rely on: `worker.manifest.Manifest`
(input) and `worker.progress.TaskProgress` (progress records).
"""
