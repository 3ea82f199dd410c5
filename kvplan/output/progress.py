"""A progress bar for long searches (`kvplan fit`), shown only on a terminal and only once the
work takes a while."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console


class DelayedProgress:
    """A progress bar on stderr that appears only once the work has taken `delay_s` seconds
    (and only on a terminal). Call it as `progress(done, total)`; `close()` at the end."""

    def __init__(self, console: Console, description: str, delay_s: float = 1.0,
                 clock: Callable[[], float] | None = None) -> None:
        import time

        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._console, self._description, self._delay_s = console, description, delay_s
        self._bar: Any = None
        self._task: Any = None
        self.shown = False

    def __call__(self, done: int, total: int) -> None:
        if self._bar is None:
            if self._clock() - self._start < self._delay_s or not self._console.is_terminal:
                return
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                                 MofNCompleteColumn(), console=self._console, transient=True)
            self._bar.start()
            self._task = self._bar.add_task(self._description, total=total)
            self.shown = True
        self._bar.update(self._task, completed=done, total=total)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
