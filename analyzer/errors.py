"""One error hierarchy for the whole project.

Library code raises these; only ``prefixcache.cli`` turns them into messages and
exit codes (0 clean, 1 findings, 2 usage or input error).
"""

from __future__ import annotations


class PrefixcacheError(Exception):
    """Base of every error prefixcache raises on purpose."""


class InputError(PrefixcacheError):
    """A log file or record that cannot be read.

    ``source`` is the file (or ``-`` for stdin), ``record`` the 1-based line or
    record number (0 when the whole file is at fault), ``field`` the JSON path of
    the offending field when known. ``str(err)`` names all three.
    """

    def __init__(self, message: str, source: str = "", record: int = 0, field: str = "") -> None:
        self.reason = message
        self.source = source
        self.record = record
        self.field = field
        where = source or "<input>"
        if record:
            where += f":{record}"
        if field:
            where += f" field {field}"
        super().__init__(f"{where}: {message}")


class ConfigError(PrefixcacheError):
    """Bad options, configuration files, tokenizer or template names."""


class EngineError(PrefixcacheError):
    """The replay engine cannot run (unusable model, out of memory, prompt too long)."""
