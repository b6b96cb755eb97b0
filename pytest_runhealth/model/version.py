"""The package's version: the one place it is written (pyproject.toml reads it; the reports and the gate's
verdict record name it). A leaf of its own, so that a sub-plugin names the version without importing the
package's entry module."""

__version__ = "0.2.0"
