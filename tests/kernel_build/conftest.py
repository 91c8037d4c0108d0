"""Fixtures of the kernel build tests: the real Debian 6.1 tree, extracted once.

The extracted source lives in the project's kernel cache (``.perfab/kernel``,
or ``$PERFAB_KERNEL_CACHE``) and is shared by every test; each test that
must not see another's cache entries gets a fresh cache root whose
``sources`` is a link to the shared one.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from perfab.kernel import source as ksource

ROOT = Path(__file__).resolve().parents[2]


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "kernel_build: builds a whole kernel (minutes); runs under "
                                       "`make kernel-studies` (PERFAB_KERNEL_BUILDS=1) or when the build is cached")


@pytest.fixture(scope="session")
def shared_cache() -> Path:
    """The project's kernel cache, with Debian's 6.1 tree extracted into it."""
    if not ksource.DEBIAN_TARBALL.is_file():
        pytest.skip(f"{ksource.DEBIAN_TARBALL} is absent; run `make kernel-deps`")
    cache = Path(os.environ.get("PERFAB_KERNEL_CACHE", ROOT / ".perfab" / "kernel")).resolve()
    identity = ksource.identify(None, None, cache)
    ksource.tree_for(None, identity, cache, lambda line: None)
    return cache


@pytest.fixture(scope="session")
def debian_tree(shared_cache: Path) -> Path:
    """The extracted pristine tree."""
    return ksource.tree_for(None, ksource.identify(None, None, shared_cache), shared_cache, lambda line: None)


@pytest.fixture
def fresh_cache(tmp_path_factory, shared_cache: Path) -> Path:
    """An empty kernel cache that shares the extracted source (not the built kernels)."""
    root = tmp_path_factory.mktemp("kcache")
    (root / "sources").symlink_to(shared_cache / "sources")
    return root
