"""Stage 6: rendering an analysis as text, markdown, JSON, CSV or HTML.

``perfab.report.document`` builds the report document from the analysis
once; every format renders that document (``perfab.report.schema``
documents the JSON's versioned format).

``render``, ``regressions`` and ``RENDERERS`` live in ``perfab.report.dispatch``
and are imported on first use, so that importing a light submodule (the format
names in ``perfab.report.kinds``, which the command line reads) does not import
the analysis and its numerical libraries.
"""

from __future__ import annotations

_LAZY = ("RENDERERS", "regressions", "render")


def __getattr__(name: str):
    """The names of ``perfab.report.dispatch``, imported when first asked for (PEP 562)."""
    if name in _LAZY:
        from perfab.report import dispatch

        return getattr(dispatch, name)
    raise AttributeError(f"module 'perfab.report' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + list(_LAZY))
