"""Each session's latest prepared request, held for its next one, in bounded memory (issue 25 item 4).

Lint compares every request with its session's previous one (and a session's first request with an
earlier owner), so it keeps each session's latest :class:`~prefixcache.analyzer.prepare.Prepared`
request (token ids, the request's messages) until the session sends again — for every session
of the input, as a log does not say when a session has ended. On a log of thousands of sessions
that is most of lint's (and ``simulate``'s drift pass) memory: a 1 GB agent log holds thousands.

:class:`HeldLast` keeps the :data:`IN_MEMORY` most recently stored sessions in memory and writes
the others, pickled, to an anonymous temporary file (deleted when closed or at exit), keeping two
integers a session in memory; one is read back when its session sends again (or is looked up as an
owner). What is read back equals what was stored, so lint's results do not depend on where a
request was held.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections import OrderedDict
from typing import Any, Iterator

#: Sessions whose latest request stays in memory (the most recently stored ones).
IN_MEMORY = 256


class HeldLast:
    """session → its latest prepared request (``get`` / ``[session] = p``, as a dict): the
    ``in_memory`` (default :data:`IN_MEMORY`) most recently stored in memory, the rest in a temporary
    file (see the module doc)."""

    def __init__(self, in_memory: int | None = None) -> None:
        self.in_memory = IN_MEMORY if in_memory is None else in_memory
        self._mem: OrderedDict[str, Any] = OrderedDict()
        self._disk: dict[str, int] = {}  # session → record number in the file
        self._off = array("q", [0])  # record i is bytes off[i]:off[i+1]
        self._file: Any = None

    def __len__(self) -> int:
        return len(self._mem) + len(self._disk)

    def __contains__(self, session: str) -> bool:
        return session in self._mem or session in self._disk

    def get(self, session: str, default: Any = None) -> Any:
        """The latest request stored for ``session`` (read back from the file if it was written out),
        else ``default``."""
        p = self._mem.get(session)
        if p is not None:
            return p
        i = self._disk.get(session)
        if i is None:
            return default
        return pickle.loads(os.pread(self._file.fileno(), self._off[i + 1] - self._off[i], self._off[i]))

    def values(self) -> Iterator[Any]:
        """Every session's latest request: those in memory, then those read back from the file."""
        yield from list(self._mem.values())
        for session in list(self._disk):
            yield self.get(session)

    def __setitem__(self, session: str, p: Any) -> None:
        self._disk.pop(session, None)  # its bytes stay in the file (appended, never rewritten)
        self._mem[session] = p
        self._mem.move_to_end(session)
        while len(self._mem) > self.in_memory:
            old, q = self._mem.popitem(last=False)
            self._write(old, q)

    def _write(self, session: str, p: Any) -> None:
        blob = pickle.dumps(p, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="prefixcache-held-")
            self._file.seek(0, os.SEEK_END)
            self._file.write(blob)
            self._file.flush()
        except OSError as exc:  # a full or read-only temporary folder: name it (the CLI prints one line, exit 2)
            raise OSError(exc.errno, f"cannot write lint's held sessions there: {exc.strerror or exc} "
                          "(TMPDIR sets the folder)", tempfile.gettempdir()) from None
        self._disk[session] = len(self._off) - 1
        self._off.append(self._off[-1] + len(blob))

    def close(self) -> None:
        """Delete the temporary file (also done when the object is collected)."""
        if self._file is not None:
            self._file.close()
            self._file = None
        self._disk.clear()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
