"""Tables that never lie at any terminal width: a number is never cut, an identifying column is
never dropped, a word (a flag, a GPU name's part) is never broken.

Every table of the CLI goes through `print_table`. It measures each column twice — its natural
width (every cell on one line) and its narrowest honest width (text cells wrapped at spaces, so
the longest word; a number cell is one word) — and then, at the console's width:

1. prints every cell on one line when that fits;
2. else wraps the wrappable cells (text at spaces, headers at spaces), widths set by hand so rich
   never shrinks a column below its longest word;
3. else does the same with one space between columns instead of two;
4. else leaves out the least important columns that may go (`Column.drop`, highest first) and
   says so under the table;
5. else prints the rows vertically, `header value` pairs, each pair kept whole.

Renders only; never computes a number.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

Cell = str | Text


@dataclass(frozen=True)
class Column:
    """One column. `drop` > 0: the column may be left out when the width is short (the highest
    first); 0: it identifies the row or carries the answer and is never left out. `wrap`: its
    cells are text that may wrap at spaces (names, sentences); otherwise a cell is never split.
    `key`: it identifies the row (the GPU, the count, the group): never dropped, and on the
    first line of a row's block in the vertical layout (`bare`: without its header there)."""

    header: str
    justify: Literal["left", "right"] = "left"
    drop: int = 0
    wrap: bool = False
    key: bool = False
    bare: bool = False

    def __post_init__(self) -> None:
        if self.key and self.drop:
            raise ValueError(f"column {self.header!r}: an identifying column is never dropped")


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else Text(cell)


def _plain(cell: Cell) -> str:
    return cell.plain if isinstance(cell, Text) else cell


def _longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def _longest_line(text: str) -> int:
    return max((cell_len(line) for line in text.split("\n")), default=0)


@dataclass(frozen=True)
class Layout:
    """What `plan_layout` decided: the columns kept (indices), their widths, or vertical."""

    kept: tuple[int, ...]
    widths: tuple[int, ...]
    vertical: bool = False
    compact: bool = False  # one space between columns

    def dropped(self, columns: Sequence[Column]) -> list[str]:
        return [c.header for i, c in enumerate(columns) if i not in self.kept]


def _table(title: str | None, columns: Sequence[Column], widths: Sequence[int] | None,
           pad_edge: bool, compact: bool = False) -> Table:
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=pad_edge,
                  padding=(0, 0) if compact else (0, 1), collapse_padding=True, show_lines=False)
    # rich measures a fixed-width first column with one cell of padding but renders it with two
    # when the edge is padded and padding collapses: give it the cell it will take
    first_extra = 1 if pad_edge and not compact else 0
    for i, c in enumerate(columns):
        table.add_column(c.header, justify=c.justify, no_wrap=False, overflow="fold",
                         width=None if widths is None else widths[i] + (first_extra if i == 0
                                                                        else 0))
    return table


def _overhead(console: Console, n: int, pad_edge: bool, compact: bool) -> int:
    """Borders and padding of an n-column table: its width less the columns'."""
    table = _table(None, [Column("")] * n, [1] * n, pad_edge, compact)
    return Measurement.get(console, console.options, table).maximum - n


def plan_layout(columns: Sequence[Column], rows: Sequence[Sequence[Cell]], width: int,
                overhead: Callable[[int, bool], int]) -> Layout:
    """The widths at `width` columns (see the module's steps). `overhead(n, compact)` is the
    width the borders and padding of an n-column table take."""
    natural = []
    narrowest = []
    for i, c in enumerate(columns):
        cells = [_plain(r[i]) for r in rows]
        natural.append(max([cell_len(c.header), *(_longest_line(x) for x in cells)]))
        narrowest.append(max([_longest_word(c.header),
                              *((_longest_word(x) if c.wrap else _longest_line(x))
                                for x in cells)]))
    kept = list(range(len(columns)))
    while True:
        for compact in (False, True):
            room = width - overhead(len(kept), compact)
            nat = [natural[i] for i in kept]
            low = [narrowest[i] for i in kept]
            if sum(nat) <= room:
                return Layout(tuple(kept), tuple(nat), compact=compact)
            if sum(low) <= room:
                return Layout(tuple(kept), _share(nat, low, room), compact=compact)
        droppable = [i for i in kept if columns[i].drop > 0]
        if not droppable:
            return Layout(tuple(range(len(columns))), (), vertical=True)
        kept.remove(max(droppable, key=lambda i: (columns[i].drop, i)))


def _share(natural: Sequence[int], narrowest: Sequence[int], room: int) -> tuple[int, ...]:
    """Widths between each column's narrowest and natural width within `room`: the columns
    nearest to their natural width get it first (a header on one line), the rest goes to the
    column furthest from it (the names that wrap)."""
    widths = list(narrowest)
    extra = room - sum(widths)
    for k in sorted(range(len(widths)), key=lambda j: (natural[j] - widths[j], j)):
        need = natural[k] - widths[k]
        if 0 < need <= extra and need < max(natural[j] - widths[j] for j in range(len(widths))):
            widths[k] += need
            extra -= need
    while extra > 0:
        k = max(range(len(widths)), key=lambda j: (natural[j] - widths[j], -j))
        if natural[k] - widths[k] <= 0:
            break
        widths[k] += 1
        extra -= 1
    return tuple(widths)


def print_table(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]], *,
                title: str | None = None, pad_edge: bool = True,
                what: str = "row") -> Layout:
    """Print the table at the console's width without cutting a number, dropping an identifying
    column or breaking a word; returns the layout used (tests look at it)."""
    width = console.width
    layout = plan_layout(columns, rows, width,
                         lambda n, compact: _overhead(console, n, pad_edge, compact))
    if layout.vertical:
        _print_vertical(console, columns, rows, title=title, what=what)
        return layout
    cols = [columns[i] for i in layout.kept]
    table = _table(title, cols, layout.widths, pad_edge, layout.compact)
    for r in rows:  # a str cell is plain text, never rich markup
        table.add_row(*(_text(r[i]) for i in layout.kept))
    console.print(table)
    dropped = layout.dropped(columns)
    if dropped:
        console.print(Text(f"(left out at {width} columns: {', '.join(dropped)}; a wider "
                           "terminal or --json shows them)", style="dim"))
    return layout


def _print_vertical(console: Console, columns: Sequence[Column], rows: Sequence[Sequence[Cell]],
                    *, title: str | None, what: str) -> None:
    """One block per row: the identifying cells on the first line, then `header value` pairs
    packed into lines no wider than the console (a pair is never split)."""
    width = console.width
    if title:
        console.print(Text(title, style="italic"))
    head_keys = [i for i, c in enumerate(columns) if c.key] or [0]
    for r in rows:
        head = Text()
        for n, i in enumerate(head_keys):
            if n:
                head.append("  ")
            if not columns[i].bare:
                head.append(f"{columns[i].header} ", style="dim")
            head.append_text(_text(r[i]))
        console.print(head)
        line = Text("    ")
        for i, c in enumerate(columns):
            if i in head_keys:
                continue
            pair = Text(f"{c.header} ", style="dim")
            pair.append_text(_text(r[i]))
            if line.cell_len > 4 and line.cell_len + 3 + pair.cell_len > width:
                console.print(line)
                line = Text("    ")
            if line.cell_len > 4:
                line.append(" · ", style="dim")
            line.append_text(pair)
        if line.cell_len > 4:
            console.print(line)
    console.print(Text(f"(one {what} per block at {width} columns; a wider terminal shows a "
                       "table)", style="dim"))


def short_gpu_name(name: str) -> str:
    """A catalogue name without the vendor's prefix ("NVIDIA H100 SXM 80GB" → "H100 SXM 80GB");
    still unique in the catalogue."""
    return name.removeprefix("NVIDIA ").removeprefix("AMD Instinct ").removeprefix("AMD ")
