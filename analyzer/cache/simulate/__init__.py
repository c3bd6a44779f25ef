"""prefixcache.analyzer.cache.simulate."""
