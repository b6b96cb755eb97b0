"""Probes of the live system a run depends on: the GPU (NVML), the LM Studio
judge (HTTP and its server log), the trainer's processes and the sweep
orchestrator. Each one is behind a small object a check receives as a fixture,
so checks are tested against real local servers, real subprocesses and an
injectable GPU stand-in."""
