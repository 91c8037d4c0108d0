"""How a long command shows where it stands: a progress bar on a terminal, a line a minute elsewhere."""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs milliseconds of start-up; annotations are never evaluated
if TYPE_CHECKING:
    from typing import TextIO


class Progress:
    """A rich progress bar with ETA on a terminal; otherwise, in a long session, one line a minute."""

    LINE_EVERY_S = 60.0  # off a terminal: seconds between progress lines (none in a session shorter than this)

    def __init__(self, stream: TextIO):
        import time

        self.stream = stream
        self.bar = None
        self.clock = time.monotonic
        self.started = self.last = self.stretch = self.clock()  # the session's, the last line's, the stretch's start

    def __enter__(self):
        if getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                TimeRemainingColumn(), console=Console(file=self.stream), transient=True)
            self.bar.__enter__()
            self.task = None
        return self

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def __call__(self, done: int, total: int, label: str) -> None:
        if self.bar is None:
            self._line(done, total, label)
            return
        if self.task is None:
            self.task = self.bar.add_task(label, total=total)
        self.bar.update(self.task, completed=done, total=total, description=label)
        if done >= total:
            self.bar.remove_task(self.task)
            self.task = None

    def log(self, line: str) -> None:
        if self.bar is not None:
            self.bar.console.print(line, markup=False, highlight=False)
        else:
            print(f"perfab: {line}", file=self.stream)

    def _line(self, done: int, total: int, label: str) -> None:
        """``run 12 of 40 (locksys inlined), 3m elapsed, about 7m left``, at most once a minute."""
        now = self.clock()
        if done == 0:
            self.stretch = now  # a workload's runs begin: the estimate is theirs
        if now - self.last < self.LINE_EVERY_S or not 0 < done < total:
            return
        self.last = now
        left = (now - self.stretch) / done * (total - done)
        self.log(f"run {done} of {total} ({label}), {_minutes(now - self.started)} elapsed, "
                 f"about {_minutes(left)} left")


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f}m" if seconds >= 90 else f"{seconds:.0f}s"
