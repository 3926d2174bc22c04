"""bot/logwriter.py: serve's log lines are written by a thread of their own, in order, and none is lost on exit."""

from __future__ import annotations

import io
import logging
import threading

from bot.logwriter import logs_written_off_thread


class _Recording(logging.StreamHandler[io.StringIO]):
    """A stream handler that also notes which thread wrote each line."""

    def __init__(self) -> None:
        super().__init__(io.StringIO())
        self.writers: set[int] = set()

    def emit(self, record: logging.LogRecord) -> None:
        self.writers.add(threading.get_ident())
        super().emit(record)


def test_lines_from_many_threads_are_written_by_one_other_thread_in_order_and_all_by_exit() -> None:
    logger = logging.getLogger("test_logwriter.many")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    handler = _Recording()
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    try:
        with logs_written_off_thread(logger):
            assert logger.handlers != [handler]  # the queue's handler stands in for it
            value = ["before"]
            logger.info("value %s", value)
            value[0] = "changed"  # the message is the one logged, not what its argument became later
            threads = [
                threading.Thread(target=lambda n=n: [logger.info("thread %d line %d", n, i) for i in range(50)])
                for n in range(8)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            logger.debug("below the logger's level")
        lines = handler.stream.getvalue().splitlines()
        assert logger.handlers == [handler]  # put back as it was
    finally:
        logger.removeHandler(handler)
    assert lines[0] == "INFO value ['before']"
    assert len(lines) == 1 + 8 * 50 and not any("below" in line for line in lines)
    for n in range(8):  # each thread's lines in the order it logged them
        mine = [line for line in lines if line.startswith(f"INFO thread {n} ")]
        assert mine == [f"INFO thread {n} line {i}" for i in range(50)]
    assert threading.get_ident() not in handler.writers and len(handler.writers) == 1


def test_each_handler_keeps_its_own_level() -> None:
    logger = logging.getLogger("test_logwriter.levels")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    everything, warnings = _Recording(), _Recording()
    warnings.setLevel(logging.WARNING)
    logger.addHandler(everything)
    logger.addHandler(warnings)
    try:
        with logs_written_off_thread(logger):
            logger.info("an info line")
            logger.warning("a warning")
    finally:
        logger.removeHandler(everything)
        logger.removeHandler(warnings)
    assert everything.stream.getvalue().splitlines() == ["an info line", "a warning"]
    assert warnings.stream.getvalue().splitlines() == ["a warning"]
