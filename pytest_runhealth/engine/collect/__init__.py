"""Holds the anchor file the run-health checks are collected from (``collection.py``)."""
