"""An example check pack for pytest-runhealth (IDs ACME001-ACME999)."""
