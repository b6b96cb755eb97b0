"""pytest-runhealth: run-health assertions for ML training and evaluation runs."""

__version__ = "0.1.0"

from .finding import Evidence, Finding  # noqa: E402
from .registry import CheckSpec, Registry, RegistryError, check  # noqa: E402

__all__ = ["check", "CheckSpec", "Evidence", "Finding", "Registry", "RegistryError", "__version__"]
