"""prefixcache: a profiler for agent prompts and KV prefix caches.

The distribution installs its folders as subpackages of this namespace
(``prefixcache.cli``, ``prefixcache.analyzer``, ``prefixcache.replay``,
``prefixcache.templates``) so nothing generic lands in site-packages.
"""

__version__ = "0.1.0"
