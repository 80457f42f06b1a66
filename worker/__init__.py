"""The face-fusion worker: runs on compute nodes inside each Slurm array task. Never imports Django.

Entry points: `python -m worker run --manifest M [--task-index N]`, `python -m worker swap ...`,
`python -m worker models check|fetch`. Definitions other programs rely on: `worker.manifest.Manifest`
(input), `worker.progress.TaskProgress` (progress records), `worker.layout.JobFolder` (where a job's
files lie) and `worker.choices` (engine names, face selectors, target statuses). Those modules, and
`worker.errors`, import no numpy, OpenCV or onnxruntime: the portal imports them.
"""
