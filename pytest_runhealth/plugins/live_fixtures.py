"""The live services' one hook: a bad probe timeout or LM Studio address is a
usage error at configure time, not N check failures later. The settings and
services themselves are ``live/fixtures.py``."""

from __future__ import annotations

import pytest

from ..live.fixtures import probe_timeout, server_url


def pytest_configure(config: pytest.Config) -> None:
    probe_timeout(config)  # a bad value is a usage error now, not N check failures later
    server_url(config)
