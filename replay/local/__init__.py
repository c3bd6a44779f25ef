"""prefixcache.replay.local."""
