"""Cache models by ``--cache`` name: the registry, complete once this package is imported.

:mod:`.base` holds :class:`~.base.CacheModel`, its :class:`~.base.Traits`, :class:`~.base.CacheSpec`,
:class:`~.base.Hit` and the registry (:data:`~.base.MODELS`, :func:`~.base.register`); each family
registers itself: :mod:`.vllm` (``vllm``, ``blocks``), :mod:`.sglang`, :mod:`.providers`
(``openai``, ``anthropic``, ``deepseek``), :mod:`.llamacpp`. :data:`CACHES` is the names in
registration order (the CLI's order).
"""

from prefixcache.analyzer.cache.models.base import (
    MODELS, CacheModel, CacheSpec, Hit, Traits, lru_stack_order, make_model, model_class, register, pool_blocks,
    traits_for,
)
from prefixcache.analyzer.cache.models.vllm import BlocksModel, VllmModel
from prefixcache.analyzer.cache.models.sglang import SglangModel
from prefixcache.analyzer.cache.models.providers import AnthropicModel, DeepSeekModel, OpenAIModel
from prefixcache.analyzer.cache.models.llamacpp import LlamaCppModel

#: ``--cache`` names, in registration order.
CACHES: tuple[str, ...] = tuple(MODELS)

__all__ = [
    "CACHES", "MODELS", "AnthropicModel", "BlocksModel", "CacheModel", "CacheSpec", "DeepSeekModel", "Hit",
    "LlamaCppModel", "OpenAIModel", "SglangModel", "Traits", "VllmModel", "lru_stack_order", "make_model",
    "model_class", "register", "pool_blocks", "traits_for",
]
