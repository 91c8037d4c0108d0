"""Fixtures for tests/cachegrind; the helpers live in cachegrind_helpers.py (a unique module name: every tests/
folder has a conftest)."""

from cachegrind_helpers import *  # noqa: F401,F403 - fixtures are found by name
