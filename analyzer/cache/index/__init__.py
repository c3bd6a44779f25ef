"""Index structures of the cache layer: block-hash chains, the radix tree, eviction policies, compact storage."""
