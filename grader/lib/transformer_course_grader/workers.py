"""Grading jobs in worker processes that can die alone: a batch that nothing a submission does can stop.

A worker that dies while it holds a job — killed by a signal, aborted by a library (libzmq aborts
its process when the kernel refuses it a resource the grader's user shares with the kernels), or
exiting — costs that one job: the caller turns it into that notebook's row, a new worker takes the
dead one's place, and every other job is graded as usual. ``concurrent.futures`` cannot do this:
one dead worker breaks its whole pool, and every job not yet finished fails with it.
"""

from __future__ import annotations

import multiprocessing
import signal
from collections.abc import Callable, Iterable
from multiprocessing.connection import wait

__all__ = ["run_jobs", "death_description"]


def death_description(exit_code: int | None) -> str:
    """How a worker ended, in words: ``"killed by SIGABRT"``, ``"exited with status 3"``.

    Example:
        >>> death_description(-6), death_description(3)
        ('killed by SIGABRT', 'exited with status 3')
    """
    if exit_code is None:
        return "ended for an unknown reason"
    if exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exited with status {exit_code}"


def _worker(function: Callable, connection) -> None:
    """A worker's loop: receive ``(index, job)``, send back ``(index, result)``; ``None`` ends it."""
    while True:
        message = connection.recv()
        if message is None:
            return
        index, job = message
        connection.send((index, function(job)))


class _Worker:
    def __init__(self, context, function):
        self.connection, theirs = context.Pipe()
        self.process = context.Process(target=_worker, args=(function, theirs), daemon=True)
        self.process.start()
        theirs.close()
        self.index = None  # the job it holds

    def give(self, index, job) -> None:
        self.index = index
        self.connection.send((index, job))

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except OSError:
            pass
        self.process.join(timeout=5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()
        self.connection.close()


def run_jobs(
    function: Callable, jobs: Iterable, workers: int, on_death: Callable, done: Callable | None = None
) -> list:
    """``[function(job) for job in jobs]``, in ``workers`` spawned processes; a worker's death costs its job only.

    Args:
        function: a module-level function of one argument (it is pickled by reference into the
            workers); it should catch its own exceptions, as a raised one ends its worker too.
        jobs: the arguments, each picklable.
        workers: int >= 1, processes at once (at most one per job).
        on_death: ``(job, description) -> result`` for a job whose worker died while it held it;
            ``description`` says how (:func:`death_description`).
        done: optional callable run after each job (a progress bar's update).

    Returns:
        list of results in the order of ``jobs``.

    Raises:
        ValueError: for ``workers`` below 1.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"`workers` must be an int >= 1; received {workers!r}.")
    jobs = list(jobs)
    results, pending = [None] * len(jobs), list(reversed(range(len(jobs))))
    context = multiprocessing.get_context("spawn")
    pool = [_Worker(context, function) for _ in range(min(workers, len(jobs)))]
    try:
        for worker in pool:
            if pending:
                index = pending.pop()
                worker.give(index, jobs[index])
        while any(worker.index is not None for worker in pool):
            busy = {worker.connection: worker for worker in pool if worker.index is not None}
            busy.update({worker.process.sentinel: worker for worker in pool if worker.index is not None})
            for ready in wait(list(busy)):
                worker = busy[ready]
                if worker.index is None:  # both its connection and its sentinel were ready: handled
                    continue
                try:
                    index, result = worker.connection.recv() if worker.connection.poll() else (None, None)
                except (EOFError, OSError):
                    index = None
                if index is None:  # it died holding its job
                    worker.process.join()
                    index, result = (
                        worker.index,
                        on_death(jobs[worker.index], death_description(worker.process.exitcode)),
                    )
                    worker.index = None
                    worker.connection.close()
                    pool[pool.index(worker)] = worker = _Worker(context, function)
                results[index], worker.index = result, None
                if done is not None:
                    done()
                if pending:
                    index = pending.pop()
                    worker.give(index, jobs[index])
    finally:
        for worker in pool:
            worker.stop()
    return results
