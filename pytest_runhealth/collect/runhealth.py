"""The module the health checks are collected from.

It is empty on disk: at collection the plugin adds one test function per
registered check (named ``RH101-step-count-collapse``), parametrised over the
runs of every ``--run-dir``."""
