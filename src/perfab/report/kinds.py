"""The report formats, by name: one list for the CLI and the renderers (kept light to import)."""

FORMATS = ("text", "markdown", "json", "csv", "html", "lkp")
