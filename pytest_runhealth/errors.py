"""Kept so existing imports work: the fatal-error table and its reader are the
root-cause reader's (rootcause.py), one table for every check."""

from __future__ import annotations

from .rootcause import BENIGN, CAUSES, ROWS, RootCause, diagnose, strip_prefix

FatalError = RootCause
classify = diagnose

__all__ = ["BENIGN", "CAUSES", "ROWS", "FatalError", "RootCause", "classify", "diagnose", "strip_prefix"]
