"""replay.engine package."""
