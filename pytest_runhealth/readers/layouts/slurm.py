"""Slurm job logs: ``slurm-<jobid>.out`` (sbatch's default ``--output``,
``slurm-%j.out``; ``slurm-%A_%a.out`` for array jobs) and ``%x-%j.out``
(job name, job id) where the script asks for it.

The job's own output comes first and is read as any trainer log; the lines
Slurm adds are causes of their own (``rootcause_rows.SLURM_ROWS``):
``slurmstepd: error: *** JOB <id> ON <node> CANCELLED AT <time> DUE TO TIME
LIMIT ***`` (``DUE TO PREEMPTION``, ``DUE TO NODE FAILURE``, or no reason:
cancelled by a user), ``*** STEP <id>.<step> ...`` for a job step, ``Detected N
oom-kill event(s)`` (``oom_kill`` in older releases) and ``srun: error:``
lines (slurm ``src/slurmd/slurmstepd/req.c`` and ``mgr.c``, ``src/srun``)."""

from __future__ import annotations

import re

JOB_LOG = re.compile(r"^slurm-\d+(?:_\d+)?\.(?:out|err)$")


def job_logs(files: set[str]) -> list[str]:
    """The Slurm job logs among a folder's file names (``slurm-<id>.out`` only:
    a ``%x-%j.out`` name is too common to claim a folder by)."""
    return sorted(n for n in files if JOB_LOG.match(n))
