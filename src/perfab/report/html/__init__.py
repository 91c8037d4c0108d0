"""Stage 6, as a page: the report and ``perfab size`` as one self-contained HTML file each.

The page is static HTML with inline SVG drawn here in Python; it fetches
nothing and runs no script (the size page runs one small, hashed table
sorter).  One module per part:

1. ``svg``        scales, axes, dots and labels, every text escaped;
2. ``plots``      one metric: every run per side, the delta against the
                  margin, the run order;
3. ``sweep``      a metric across sweep points, ``:u``/``:k`` pairs, profiles;
4. ``table``      the verdict table and the report document's prose;
5. ``experiment`` ``render_html(report)``: the whole report document;
6. ``size``       ``render_size_html(size_diff)``: families and inline sites;
7. ``page``       the document around a body: style sheet, security policy.
"""

from __future__ import annotations

from perfab.report.html.experiment import render_html

__all__ = ["render_html"]
