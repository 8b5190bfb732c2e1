"""Doing one slow step on several things at once."""

import threading
from collections.abc import Callable, Iterable


def at_once[T](step: Callable[[T], object], things: Iterable[T]) -> None:
    """``step`` on each of ``things``, each in a thread of its own (starting a server or
    installing a database is seconds of waiting each); the first failure is raised once all
    have ended."""
    failures: list[BaseException] = []

    def run(thing: T) -> None:
        try:
            step(thing)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=run, args=(thing,)) for thing in things]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
