"""The anchor pytest is pointed at to collect the run-health checks.

It stays empty: ``collection.RunHealthModule`` collects it, with a module
object of its own made fresh each session (one test per check), and the node
id ``runhealth`` instead of this file's path. See ``collection.py`` for why."""
