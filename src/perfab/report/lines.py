"""Lines of at most 80 columns, as the plain-text reports (and the HTML's SETUP block) lay them out."""

from __future__ import annotations

import textwrap

WIDTH = 80


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, ending in ``...`` when cut."""
    return text if len(text) <= width else text[: width - 3] + "..."


def wrap(text: str, indent: str = "  ") -> list[str]:
    """Lines of at most 80 columns, broken at spaces, or after a '/' inside a long word (a list of labels)."""
    if len(text) <= WIDTH:
        return [text]
    lead = text[: len(text) - len(text.lstrip())]
    lines = textwrap.wrap(text.lstrip(), WIDTH, initial_indent=lead, subsequent_indent=indent,
                          break_on_hyphens=False, break_long_words=False) or [""]
    out: list[str] = []
    for line in lines:
        while len(line) > WIDTH and "/" in line[len(indent):WIDTH]:
            cut = line.rindex("/", 0, WIDTH) + 1
            out.append(line[:cut])
            line = indent + line[cut:]
        out.append(line)
    return out


def wrap_all(items, indent: str = "  ") -> list[str]:
    """Each item wrapped to 80 columns, one list of lines."""
    return [line for item in items for line in wrap(item, indent)]
