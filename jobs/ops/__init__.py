"""Operations: `/healthz`, `/readyz` and `/metrics` (docs/operations.md).

    metrics     the metrics the processes record as things happen (submissions, watcher cycles,
                SSH errors, WebSocket connections): prometheus_client, multi-process when
                PROMETHEUS_MULTIPROC_DIR is set
    collectors  the figures read at scrape time (jobs, targets, bookings, GPU-hours, RQ queues,
                images per second, the watcher's age): cheap aggregate queries, never SSH
    heartbeat   the watcher's last cycle per cluster profile, a Redis hash of plain numbers
    health      the readiness checks, in plain words and without secrets
    views       the three thin views, and who may read /metrics
"""
