"""``python -m perfab.spec``: print the spec reference the README carries."""

from perfab.spec.schema import reference_markdown

print(reference_markdown(), end="")
