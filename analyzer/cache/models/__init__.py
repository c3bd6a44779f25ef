"""prefixcache.analyzer.cache.models.registry."""
