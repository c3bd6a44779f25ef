"""The in-process replay stack: a local model (transformers + torch) whose KV store is driven by the analyzer's block index."""
