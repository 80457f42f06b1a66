"""Slurm 22.05: commands as argument lists (`commands`), pure parsers of their output (`output`).

Nothing here talks to the cluster: builders return argv lists for `SSHRunner.run`/`run_batch`,
parsers take the text those commands printed. See `cluster.states` for the watching rule (a job gone
from squeue is never assumed successful: sacct decides; unknown to both means lost).

Traps of 22.05's JSON, all seen on the real cluster (samples in tests/cluster/samples/):

- `squeue --json` IGNORES every filter (--jobs, --user, --states): it prints every job slurmctld
  holds, other users' too, and finished ones until MinJobAge. `parse_squeue(..., job_ids=...)`
  filters. The filters are still passed, for versions that honour them. The watcher, which asks
  every few seconds, reads squeue's text instead (`queue`: it honours --jobs; its own traps there).
- `sacct --json` LOSES exit codes: any normal exit is dumped as {"status": "SUCCESS",
  "return_code": 0}, exit 3 included (the WIFEXITED branch never sets the code); signals survive.
  Run `sacct_exit_codes_argv` (plain `sacct -P`) alongside and pass its output to `parse_sacct`.
  Without it, a FAILED task whose JSON says SUCCESS gets exit_code None (unknown), never 0.
- squeue's `exit_code` is a raw wait status: 768 is exit 3, 9 is SIGKILL, 15 SIGTERM.
- A pending array is ONE record: squeue `array_task_string` "2-3" or "1-3%1"; sacct `array.task`
  a hex bitmap "0xC" (bits 2 and 3) with `task_id` null. Both are expanded into one task per index.
- The last task of an array to start reuses the array's own job id (33_3 runs as job 33).
- squeue's `end_time` of a running job is the projected end (start + time limit), not an end.
- sacct with no job ids lists only jobs since midnight: lookups by name pass --starttime.
- sacct reports "Nothing found" (error 9003) as an error entry, not as an empty list.
- sacct `nodes` is "None assigned" for a task that never ran.
- slurmdbd stores a `"` in a job NAME as a backtick (comments are kept as they are): sacct's name
  of `say "hi"` is "say `hi`" (`--name` still finds it). `find_job_by_name` compares accordingly.
  A name with a `'` is never found by `sacct --name`: SbatchSpec and sacct_argv refuse it.
"""
from .accounting import AccountingAnswer, accounting_when_needed_argv, parse_accounting_when_needed
from .commands import (
    sacct_argv,
    sacct_exit_codes_argv,
    sbatch_argv,
    scancel_argv,
    scontrol_partitions_argv,
    sinfo_argv,
    squeue_argv,
)
from .history import GpuUse, gpu_history_argv, parse_gpu_history
from .limits import ClusterLimits, chunk_size_for, parse_scontrol_config, sbatch_refusal, scontrol_config_argv
from .node_states import (
    CONDITIONS,
    GPU_STATES,
    HEALTH_TAG,
    USABLE_CONDITIONS,
    gpu_states,
    health_fault,
    node_condition,
    node_gpus,
)
from .nodes import (
    SlurmNode,
    dead_nodes_argv,
    expand_hostlist,
    gres_gpu_types,
    parse_dead_nodes,
    parse_sinfo,
    parse_slurm_release,
    reserves_gpus,
)
from .output import (
    SlurmPartition,
    SlurmTask,
    expand_array_range,
    find_job_by_name,
    parse_sacct,
    parse_sacct_exit_codes,
    parse_sbatch_parsable,
    parse_scontrol_partitions,
    parse_squeue,
)
from .power import WAKE_JOB_NAME, wake_job_argv, wake_minutes
from .queue import parse_squeue_tasks, squeue_tasks_argv
from .reservations import (
    REFUSAL_CODES,
    NodeGpus,
    SlurmReservation,
    gpu_inventory_argv,
    job_leave_reservation_argv,
    parse_gpu_inventory,
    parse_reservations,
    parse_slurm_time,
    reservation_create_argv,
    reservation_delete_argv,
    reservation_refusal,
    reservation_update_argv,
    reservations_show_argv,
    slurm_time,
    window_minutes,
)

__all__ = [
    "CONDITIONS", "GPU_STATES", "USABLE_CONDITIONS", "gpu_states", "node_condition", "node_gpus", "health_fault",
    "HEALTH_TAG",
    # waking a booking's asleep nodes (power saving)
    "WAKE_JOB_NAME", "wake_job_argv", "wake_minutes",
    "sbatch_argv", "squeue_argv", "sacct_argv", "sacct_exit_codes_argv", "scancel_argv", "sinfo_argv",
    "scontrol_partitions_argv", "accounting_when_needed_argv", "AccountingAnswer", "parse_accounting_when_needed",
    "squeue_tasks_argv", "parse_squeue_tasks", "dead_nodes_argv", "parse_dead_nodes",
    "parse_slurm_release", "reserves_gpus",
    "SlurmTask", "SlurmNode", "SlurmPartition", "parse_sbatch_parsable", "parse_squeue", "parse_sacct",
    "parse_sacct_exit_codes", "parse_sinfo", "parse_scontrol_partitions", "gres_gpu_types",
    "find_job_by_name", "expand_array_range",
    "ClusterLimits", "scontrol_config_argv", "parse_scontrol_config", "chunk_size_for", "sbatch_refusal",
    # reservations, GPU inventory and GPU-use history (bookings)
    "SlurmReservation", "NodeGpus", "GpuUse", "REFUSAL_CODES", "reservation_create_argv", "reservation_update_argv",
    "reservation_delete_argv", "reservations_show_argv", "parse_reservations", "reservation_refusal",
    "gpu_inventory_argv", "parse_gpu_inventory", "gpu_history_argv", "parse_gpu_history", "expand_hostlist",
    "slurm_time", "parse_slurm_time", "window_minutes", "job_leave_reservation_argv",
]
