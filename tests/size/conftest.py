"""Fixtures for tests/size; the helpers live in size_helpers.py (a unique module name: every tests/ folder has a
conftest)."""

from size_helpers import *  # noqa: F401,F403 - fixtures are found by name
