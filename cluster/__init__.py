"""The portal's side of the cluster: SSH + SFTP, Slurm commands and their output, batch scripts.

Plain Python: imports neither Django nor `worker`. Everything the portal needs is exported here;
the modules behind it are free to change.

    import cluster
    runner = cluster.runner_for(profile)  # any object with .cluster_config() -> ClusterConfig
    tasks = cluster.parse_squeue(runner.run(cluster.squeue_argv(), check=True).stdout, job_ids=["123"])

`runner_for` is the portal's one seam to the cluster: call it as `cluster.runner_for(...)`, so a test
replaces it in one place.
"""
from .errors import (
    AuthenticationFailed,
    ClusterError,
    ClusterUnreachable,
    CommandFailed,
    CommandTimedOut,
    HostKeyRejected,
    PathNotAllowed,
    RemoteFileError,
    SlurmError,
)
from .paths import (
    FolderEntry,
    FolderListing,
    check_in_roots,
    list_folder_argv,
    list_folder_in_roots,
    map_path,
    resolve_remote_in_roots,
)
from .resources import (
    check_slurm_fields,
    mem_mb,
    mem_text,
    time_limit_seconds,
    validate_gres,
    validate_mem,
    validate_time_limit,
)
from .sbatch import SbatchSpec, compress_ranges, render_script
from .slurm import (
    CONDITIONS,
    GPU_STATES,
    REFUSAL_CODES,
    USABLE_CONDITIONS,
    ClusterLimits,
    GpuUse,
    NodeGpus,
    SlurmNode,
    SlurmPartition,
    SlurmReservation,
    SlurmTask,
    chunk_size_for,
    expand_array_range,
    expand_hostlist,
    find_job_by_name,
    gpu_history_argv,
    gpu_inventory_argv,
    gpu_states,
    gres_gpu_types,
    health_fault,
    job_leave_reservation_argv,
    node_condition,
    node_gpus,
    parse_gpu_history,
    parse_gpu_inventory,
    parse_reservations,
    parse_sacct,
    parse_sacct_exit_codes,
    parse_sbatch_parsable,
    parse_scontrol_config,
    parse_scontrol_partitions,
    parse_sinfo,
    parse_slurm_release,
    parse_slurm_time,
    parse_squeue,
    reservation_create_argv,
    reservation_delete_argv,
    reservation_refusal,
    reservation_update_argv,
    reservations_show_argv,
    reserves_gpus,
    sacct_argv,
    sacct_exit_codes_argv,
    sbatch_argv,
    sbatch_refusal,
    scancel_argv,
    scontrol_config_argv,
    scontrol_partitions_argv,
    sinfo_argv,
    slurm_time,
    squeue_argv,
    wake_job_argv,
    wake_minutes,
    window_minutes,
)
from .ssh import (
    ClusterConfig,
    CommandResult,
    RemoteEntry,
    SSHRunner,
    close_all_runners,
    get_runner,
    runner_for,
)
from .states import (
    ACTIVE_STATES,
    TERMINAL_STATES,
    base_state,
    effective_state,
    is_memory_kill,
    is_terminal,
    pending_reason,
    plain_reason,
    waking_reason,
)

__all__ = [
    # errors
    "ClusterError", "ClusterUnreachable", "CommandTimedOut", "HostKeyRejected",
    "AuthenticationFailed", "CommandFailed", "RemoteFileError", "SlurmError", "PathNotAllowed",
    # SSH
    "ClusterConfig", "CommandResult", "RemoteEntry", "SSHRunner", "get_runner", "runner_for",
    "close_all_runners",
    # Slurm commands and output
    "SlurmTask", "SlurmNode", "SlurmPartition", "sbatch_argv", "squeue_argv", "sacct_argv",
    "sacct_exit_codes_argv", "scancel_argv", "sinfo_argv", "scontrol_partitions_argv",
    "parse_sbatch_parsable", "parse_squeue", "parse_sacct", "parse_sacct_exit_codes", "parse_sinfo",
    "parse_scontrol_partitions", "gres_gpu_types", "find_job_by_name", "expand_array_range",
    "ClusterLimits", "scontrol_config_argv", "parse_scontrol_config", "chunk_size_for", "sbatch_refusal",
    # reservations, GPU inventory and GPU-use history (bookings: docs/slurm-bookings.md)
    "SlurmReservation", "NodeGpus", "GpuUse", "REFUSAL_CODES", "reservation_create_argv", "reservation_update_argv",
    "reservation_delete_argv", "reservations_show_argv", "parse_reservations", "reservation_refusal",
    "gpu_inventory_argv", "parse_gpu_inventory", "gpu_history_argv", "parse_gpu_history", "expand_hostlist",
    "slurm_time", "parse_slurm_time", "window_minutes", "job_leave_reservation_argv", "parse_slurm_release", "reserves_gpus",
    # what each node is doing (the admin's Clusters page, /metrics)
    "CONDITIONS", "GPU_STATES", "USABLE_CONDITIONS", "node_condition", "node_gpus", "gpu_states", "health_fault",
    "wake_job_argv", "wake_minutes",
    # states
    "TERMINAL_STATES", "ACTIVE_STATES", "base_state", "is_terminal", "is_memory_kill",
    "effective_state", "plain_reason", "pending_reason", "waking_reason",
    # what a job asks Slurm for
    "check_slurm_fields", "validate_time_limit", "validate_mem", "validate_gres", "time_limit_seconds",
    "mem_mb", "mem_text",
    # batch scripts
    "SbatchSpec", "render_script", "compress_ranges",
    # paths
    "check_in_roots", "resolve_remote_in_roots", "map_path", "list_folder_in_roots", "list_folder_argv",
    "FolderEntry", "FolderListing",
]
