"""prefixcache.analyzer.cache.fleet.replicas."""
