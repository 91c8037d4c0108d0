"""Load recorded tool output from tests/data/<tool>/ for the parser tests."""

from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent.parent / "data"


def read_streams(tool: str, name: str) -> tuple[str, str]:
    """(stdout, stderr) of fixture ``name``; a missing stream file reads as empty."""
    base = DATA / tool / name
    streams = []
    for suffix in (".txt", ".stderr"):
        path = base.with_name(base.name + suffix)
        streams.append(path.read_text(encoding="utf-8", errors="replace") if path.exists() else "")
    return streams[0], streams[1]


@pytest.fixture
def recorded():
    """``recorded(tool, name)`` -> (stdout, stderr) of a recorded run."""
    return read_streams


@pytest.fixture
def data_dir() -> Path:
    return DATA
