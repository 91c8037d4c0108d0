"""The HTML document around a report: head, style sheet, security policy.

A page is one file with everything inline: the style sheet below, static
SVG, and (for sortable tables only) one small script.  The page declares a
Content-Security-Policy that forbids every fetch (``default-src 'none'``)
and every script but the one whose SHA-256 it names, so even text that
slipped past escaping could neither run nor reach a network.
"""

from __future__ import annotations

import base64
import hashlib
from functools import cache
from importlib.resources import files

from perfab.report.html.svg import esc


@cache
def asset(name: str) -> str:
    """A file shipped beside this module (the style sheet, the table sorter)."""
    return files("perfab.report.html").joinpath(name).read_text(encoding="utf-8")


def _policy(script: str | None) -> str:
    scripts = "'none'"
    if script is not None:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        scripts = f"'sha256-{digest}'"
    return f"default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src {scripts}"


def document(title: str, body: str, sortable: bool = False) -> str:
    """A complete page: ``title`` is escaped here, ``body`` must already be markup."""
    script = asset("sort.js") if sortable else None
    tail = f"<script>{script}</script>" if script is not None else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{_policy(script)}\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        "<meta name=\"generator\" content=\"perfab\">\n<link rel=\"icon\" href=\"data:,\">\n"
        f"<title>{esc(title)}</title>\n<style>\n{asset('style.css')}</style>\n</head>\n<body>\n"
        f"{body}\n{tail}</body></html>\n"
    )
