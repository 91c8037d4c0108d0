"""Fixtures for tests/studies; the helpers live in studies_helpers.py (a unique module name: every tests/
folder has a conftest)."""

from studies_helpers import *  # noqa: F401,F403 - fixtures are found by name
