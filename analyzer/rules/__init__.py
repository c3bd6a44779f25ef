"""analyzer.rules package."""
