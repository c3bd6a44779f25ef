"""prefixcache.analyzer.cache.provider.rules."""
