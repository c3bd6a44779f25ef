"""prefixcache.replay.server."""
