"""Fixtures of the fleet tests; they live in fleet_helpers.py (every tests/ folder has a conftest)."""

from fleet_helpers import lab, server  # noqa: F401 - fixtures are found by name
