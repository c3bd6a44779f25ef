"""Pure, deterministic, CPU-only analysis, in stages and features.

Stages: ``ingest`` (logs → :class:`~prefixcache.analyzer.model.Request`), ``render``
(chat templates, provider layouts), ``tokenize``, and the ``prepare`` seam (rendered and
tokenized requests). Features: ``cache`` (cache models, simulation), ``lint`` (breaks and
their rules), ``canonical`` (cache-stable rewrites), ``check`` (template CI gate). The
kernel (``errors``, ``model``, ``sequence``, ``volatile``, ``identity``) is shared by all;
``api`` is the facade. Inner layers point inwards and nothing here imports rich, typer or
torch (``tests/test_layout.py``; docs/architecture.md).
"""
