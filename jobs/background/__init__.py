"""Background work (RQ): every enqueue of the portal (enqueue), the RQ worker process (rq_worker),
and submissions that Redis lost, enqueued again (recovery)."""
