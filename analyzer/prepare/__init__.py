"""The prepare seam: a :class:`~prefixcache.analyzer.model.Request` rendered and tokenized
the way its serving engine would (``Prepared``), for every command downstream.

Stages before it: ``ingest`` (logs → requests), ``render`` (request → prompt text
with segments), ``tokenize`` (text → ids, incremental per session). Features after
it (``cache``, ``lint``, ``canonical``) consume ``Prepared`` items only.
"""

from __future__ import annotations

from prefixcache.analyzer.prepare.prepared import Prepared, Preparer, prepare, usage_only
from prefixcache.analyzer.prepare.resolve import Pipeline, opaque_prefix_for, resolve

__all__ = ["Pipeline", "Prepared", "Preparer", "opaque_prefix_for", "prepare", "resolve", "usage_only"]
