"""Replay through a real local engine with a KV prefix cache. Imports analyzer, never cli."""
