"""Holding Ctrl-C across a step that must finish once begun.

A command that writes a file and then prints that it did must not be interrupted between
the two: the file would be changed and nobody told. :class:`HeldInterrupt` defers the
first SIGINT to the end of such a step; a second one interrupts at once.
"""

from __future__ import annotations

import threading

__all__ = ["HeldInterrupt"]


class HeldInterrupt:
    """Hold the first SIGINT while a step that must not be cut runs; ``pending`` says one came.

    Only in the main thread and only while Python's own handler is installed (a program
    with its own SIGINT handler keeps it untouched).
    """

    def __init__(self) -> None:
        self.pending = False
        self._previous: object = None

    def __enter__(self) -> HeldInterrupt:
        # signal only once a step is held: off the cold start of the commands that never hold one
        import signal

        if (
            threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler
        ):
            self._previous = signal.signal(signal.SIGINT, self._hold)
        return self

    def _hold(self, signum: int, frame: object) -> None:
        import signal  # local, as in __enter__

        self.pending = True
        signal.signal(signal.SIGINT, signal.default_int_handler)  # a second one is at once

    def __exit__(self, *exc: object) -> None:
        import signal  # local, as in __enter__

        if self._previous is not None:
            signal.signal(signal.SIGINT, signal.default_int_handler)
