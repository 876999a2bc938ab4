"""Work that runs in one thread beside a job's own and that whatever needs it waits for.

The filter job numbers its input first (a cold JVM's first query, alone on the cores), then
opens the lake's catalog (seconds: the Hive client, the metastore, rolling forward interrupted
commits) and registers its run beside the staging of its rows, which needs neither; every
catalog call of the lake waits for that work first (jobs/lake/store.py `Lake.ready`)."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future


class Beside:
    """One daemon thread running queued work in order. A daemon: a job that fails on its own
    (bad input) exits at once rather than wait for the work beside (a commit lock can take
    minutes); work cut short so is a crash the next job rolls forward."""

    def __init__(self) -> None:
        self._queue: queue.Queue[tuple[Callable[[], None], Future]] = queue.Queue()
        self._futures: list[Future] = []
        self._worker: threading.Thread | None = None
        self._held: Callable[[], None] | None = None

    def hold(self, work: Callable[[], None]) -> None:
        """Keep `work` to run first, from the first `submit` or wait on: until then the
        caller's own work has the cores to itself."""
        self._held = work

    def used(self) -> bool:
        """Whether any work was held or queued."""
        return self._held is not None or self._worker is not None

    def submit(self, work: Callable[[], None]) -> None:
        """Queue `work` after what is queued already (held work first)."""
        self._release()
        self._queue_up(work)

    def _release(self) -> None:
        if self._held is not None:
            held, self._held = self._held, None
            self._queue_up(held)

    def _queue_up(self, work: Callable[[], None]) -> None:
        future: Future = Future()
        self._futures.append(future)
        self._queue.put((work, future))
        if self._worker is None:
            self._worker = threading.Thread(target=self._run, name="sluice-beside", daemon=True)
            self._worker.start()

    def _run(self) -> None:
        while True:
            work, future = self._queue.get()
            try:
                work()
            except BaseException as err:  # handed to whoever waits
                future.set_exception(err)
            else:
                future.set_result(None)

    def failed_so_far(self) -> BaseException | None:
        """The first error of the work done so far, without waiting for the rest."""
        for future in self._futures:
            if not future.done():
                return None
            if (error := future.exception()) is not None:
                return error
        return None

    def failure(self) -> BaseException | None:
        """Wait for everything queued; the first error it raised, if any. From the worker
        thread itself: no wait (its own work is what is running)."""
        if threading.current_thread() is self._worker:
            return None
        self._release()
        for future in self._futures:
            if (error := future.exception()) is not None:
                return error
        return None
