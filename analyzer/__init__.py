"""Pure, deterministic, CPU-only analysis: ingest, render, tokenize, prefix index, rules, cache models.

Never imports rich, typer or torch (enforced by ``tests/test_layering.py``).
"""
