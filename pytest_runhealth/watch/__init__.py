"""``pytest-runhealth watch``: the run-health checks on a cadence, printing
only what changed (``loop`` has the exit codes).

``tail`` follows files from their last offset through the project's readers,
``trainer``/``sweep``/``evaluation`` turn what is new into lines and
evidence, ``verdicts`` runs the plugin's checks when evidence arrived (the
module says why in-process), ``notify`` sends each change to webhooks and
commands without ever blocking the watch."""

from .loop import main

__all__ = ["main"]
