"""prefixcache.analyzer.cache.index."""
