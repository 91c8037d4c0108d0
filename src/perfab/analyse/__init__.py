"""Stage 5: statistics: named methods, diagnostics, comparisons."""
