"""Fixtures for tests/size_inline; the helpers live in inline_helpers.py (a unique module name: every tests/
folder has a conftest)."""

from inline_helpers import *  # noqa: F401,F403 - fixtures are found by name
