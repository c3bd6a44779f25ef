"""Build configuration beyond pyproject.toml: the optional compiled core of the cache passes.

``analyzer/cache/index/_kernels.c`` needs only a C compiler and Python's headers. It is optional: where
it does not build, install still succeeds and the pure-Python twins in ``kernels.py`` run (same results).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("prefixcache.analyzer.cache.index._kernels", ["analyzer/cache/index/_kernels.c"],
                             extra_compile_args=["-O2"], optional=True)])
