"""The session's settings: options and ini keys, ``--run-dir``, runhealth.yaml, severity and waivers, and the trust boundary a run dir may not cross."""
