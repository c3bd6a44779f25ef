"""prefixcache: a profiler for agent prompts and KV prefix caches.

The distribution installs its folders as subpackages of this namespace
(``prefixcache.cli``, ``prefixcache.analyzer``, ``prefixcache.replay``,
``prefixcache.templates``) so nothing generic lands in site-packages.
``__version__`` is the installed distribution's version (pyproject.toml is its
one source).
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("prefixcache")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
