"""analyzer.cache package."""
