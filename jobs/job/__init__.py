"""The word "job": one Start, from the user's choices to its end.

start (the transaction that makes a job), submit (the RQ side: stage, manifest, sbatch), lifecycle
(the one table of job moves), attempts and retry (running failed targets again), expected (when it
should start and end), priority (which Slurm QOS), container (its image checked first), model_sets
(which model files its tasks used).
"""
