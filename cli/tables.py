"""Rich tables that never cut a number, at any width (a narrow terminal, ``COLUMNS=60`` on a pipe).

Rich fits a table to the console by shrinking columns, and as a last resort every column
evenly, so ``1,234`` can print as ``1,…``. :func:`print_table` sets the widths itself first.
Right-aligned columns hold figures and keep their full width; left-aligned columns hold text
and fold, never cut. In that order, until the table fits: text columns fold (widest first, down
to :data:`TEXT_MIN` characters); the table drops its borders; figure headers fold (down to
:data:`HEADER_MIN`). When even that does not fit, the table prints wider than the console
rather than with a figure cut."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

#: Narrowest a text column folds to (characters), unless its widest cell is narrower.
TEXT_MIN = 12
#: Narrowest a figure column's header folds to (characters), unless its figures are wider.
HEADER_MIN = 3


def _cell_width(console: Console, cell: object) -> int:
    """Widest line of one cell (markup strings measured as rendered)."""
    text = cell if isinstance(cell, Text) else console.render_str(str(cell))
    return max((line.cell_len for line in text.split("\n")), default=0)


def _widths(console: Console, table: Table) -> tuple[list[int], list[int]]:
    """Per column: natural width (header included) and the narrowest it may fold to."""
    natural, least = [], []
    for column in table.columns:
        cells = max((_cell_width(console, c) for c in column.cells), default=0)
        header = _cell_width(console, column.header) if table.show_header else 0
        natural.append(max(cells, header, 1))
        if column.justify == "right":
            words = max((len(w) for w in str(column.header).split()), default=0)
            least.append(max(cells, min(words, HEADER_MIN), 1))
        else:
            least.append(min(max(cells, header, 1), TEXT_MIN))
    return natural, least


def _shrink(table: Table, natural: list[int], least: list[int], room: int, figures: bool) -> list[int]:
    """Widths from ``natural`` down to ``least``, widest first, text columns first (then, with
    ``figures``, the figure columns' headers), until they fit ``room`` or cannot shrink."""
    widths = list(natural)
    for kind in (False, True) if figures else (False,):
        while sum(widths) > room:
            shrinkable = [i for i, c in enumerate(table.columns)
                          if (c.justify == "right") == kind and widths[i] > least[i]]
            if not shrinkable:
                break
            widths[max(shrinkable, key=lambda i: widths[i])] -= 1
    return widths


def _room(console: Console, table: Table) -> int:
    """Characters the columns' contents may take: the width less borders and padding."""
    pads = sum(table._get_padding_width(i) for i in range(len(table.columns)))
    return (table.width or console.width) - table._extra_width - pads


def _compact(table: Table) -> None:
    """No borders, one space between columns (a boxed table keeps a rule under its header)."""
    if table.box is not None:
        table.box, table.padding = box.SIMPLE_HEAD, (0, 0)
    else:
        table.padding = (0, 1, 0, 0)
    table.show_edge, table.pad_edge = False, False


def fit(console: Console, table: Table) -> bool:
    """Set ``table``'s column widths for ``console.width`` (see module doc): text columns fold
    first; then the table drops its borders; then figure headers fold. True when it still needs
    more than the console's width (print it uncropped). A table with other renderables than
    strings and Text in its cells is left to rich."""
    if not all(isinstance(cell, (str, Text)) for column in table.columns for cell in column.cells):
        return False
    natural, least = _widths(console, table)
    for column in table.columns:
        column.ratio = None  # a ratio would spread the widths set here again
        if column.justify == "right":
            column.no_wrap, column.overflow = False, "fold"  # a figure fits its column; only a header folds
    widths = _shrink(table, natural, least, _room(console, table), figures=False)
    if sum(widths) > _room(console, table):
        _compact(table)
        widths = _shrink(table, natural, least, _room(console, table), figures=True)
    for column, width in zip(table.columns, widths):
        column.width = width
        column.overflow = "fold"
    too_wide = sum(widths) > _room(console, table)
    if too_wide:  # rich would shrink every column evenly to the console's width: give it room
        table.width = console.width + sum(widths) - _room(console, table)
    return too_wide


def print_table(console: Console, table: Table) -> None:
    """Print ``table`` with :func:`fit` widths; uncropped when it is wider than the console."""
    console.print(table, crop=not fit(console, table))
