"""The server replay stack (``replay --server URL``): a running OpenAI-compatible engine, its kind, metrics, load shapes and predicted hits."""
