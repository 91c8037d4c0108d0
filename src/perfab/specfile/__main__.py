"""``python -m perfab.specfile``: print the spec reference the README carries."""

from perfab.specfile.schema import reference_markdown

print(reference_markdown(), end="")
