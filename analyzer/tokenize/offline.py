"""OpenAI rank files for tiktoken without a network: ``o200k_base`` and ``o200k_harmony`` offline.

tiktoken defines ``o200k_base`` (gpt-4o, gpt-4.1, gpt-5.x, o-series) and
``o200k_harmony`` (gpt-oss: the same ranks plus the harmony special tokens) but
downloads their rank file, ``o200k_base.tiktoken``, on first use. The
``bpe-openai`` package (extra ``offline``) ships that file gzipped as package
data. :func:`seed` puts it where tiktoken itself keeps a downloaded copy (its
cache folder, keyed by the SHA-1 of the download URL) after checking the SHA-256
that tiktoken publishes for the file (``tiktoken_ext/openai_public.py``); tiktoken
then loads its *own* encoding from there and checks the same hash again. So the
split pattern, the special tokens and the engine are tiktoken's, and the ranks
are byte-for-byte the published ones: the ids cannot differ from an online
tiktoken's. Only the data file of ``bpe-openai`` is used, never its engine.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class RankFile:
    """A tiktoken rank file that a package ships: the URL tiktoken loads it from, the
    SHA-256 tiktoken expects (hex), and where it lies (package, path inside it, gzipped)."""

    url: str
    sha256: str
    package: str
    member: tuple[str, ...]


_O200K = RankFile(
    url="https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    sha256="446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
    package="bpe_openai", member=("data", "o200k_base.tiktoken.gz"))

#: tiktoken encoding name -> the rank file it loads (o200k_harmony loads o200k_base's ranks).
RANK_FILES: dict[str, RankFile] = {"o200k_base": _O200K, "o200k_harmony": _O200K}


def tiktoken_cache_path(url: str) -> Path | None:
    """Where tiktoken keeps the download of ``url``: ``$TIKTOKEN_CACHE_DIR``, else
    ``$DATA_GYM_CACHE_DIR``, else ``<tmp>/data-gym-cache``, named by the URL's SHA-1
    (tiktoken's ``load.read_file_cached``). None when caching is switched off (an empty
    ``TIKTOKEN_CACHE_DIR``)."""
    base = os.environ.get("TIKTOKEN_CACHE_DIR")
    if base is None:
        base = os.environ.get("DATA_GYM_CACHE_DIR")
    if base is None:
        base = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    if base == "":
        return None
    return Path(base) / hashlib.sha1(url.encode()).hexdigest()


def package_file(package: str, *parts: str) -> Path | None:
    """A file shipped inside an installed (possibly un-importable) package, or None."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.origin:
        return None
    p = Path(spec.origin).parent.joinpath(*parts)
    return p if p.exists() else None


def shipped(name: str) -> Path | None:
    """The gzipped rank file of encoding ``name`` shipped by an installed package, or None."""
    rf = RANK_FILES.get(name)
    return package_file(rf.package, *rf.member) if rf else None


def seed(name: str) -> bool:
    """Make tiktoken's encoding ``name`` loadable offline; True when it is (already cached,
    or seeded now from the shipped file). False when no package ships it, caching is off,
    the cache cannot be written, or the shipped file's SHA-256 is not the published one
    (a corrupt copy is never written). Never touches the network."""
    rf = RANK_FILES.get(name)
    target = tiktoken_cache_path(rf.url) if rf else None
    if rf is None or target is None:
        return False
    if target.is_file():
        return True
    src = shipped(name)
    if src is None:
        return False
    try:
        data = gzip.decompress(src.read_bytes())
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    if hashlib.sha256(data).hexdigest() != rf.sha256:
        return False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f"{target.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except OSError:
        return False
    return True
