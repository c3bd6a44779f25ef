"""prefixcache.analyzer.ingest.readers."""
