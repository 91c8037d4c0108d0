"""Fixtures of the store contract tests; they live in contract_helpers.py (every tests/ folder has a conftest)."""

from contract_helpers import backend, db, pg, pg_url, stores  # noqa: F401 - fixtures are found by name
