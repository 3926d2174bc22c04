"""What Polyaxon changed since the last tick, in a number of requests that does not grow with the active runs.

The first tick, and one every `resync_every`, lists every active run of the project (one request per 1,000, plus
one for the cursor); every other tick lists only the runs Polyaxon updated since the cursor (their `updated_at`
moves on each status change and each outputs sync), done ones included, so a run that ended arrives with its
final state and a run that did not change costs nothing. A run missing from an incremental list is unchanged: the
database already holds what Polyaxon says about it. So is a run the list shows again (the cursor's overlap) with
the `updated_at` the watcher already handled: left out, it costs nothing either (a waiting run would otherwise
have its conditions read on every tick until another run changed).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.polyaxon import ProjectMissingError, RemoteView

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway, RunInfo

PAGE_SIZE = 1000
# The next list starts this long before the newest change seen. Polyaxon stamps `updated_at` when it saves a run,
# before its transaction commits: on a busy server a status write can wait seconds for the database (the local
# server's SQLite waits up to 5 s for its lock) and commit after a newer change was listed. With one second, one
# run in 500 of a saturated bench stayed "created" on its card until the next full list (10 min). A run listed
# again unchanged costs nothing (`handled`): the overlap costs only payload, within the same one request.
OVERLAP = timedelta(seconds=10)
# A full list now and then also finds what no change would announce (a run deleted in Polyaxon's UI).
RESYNC_EVERY = timedelta(minutes=10)


def pages(count: int, page_size: int) -> int:
    """Requests a paged list of `count` runs took (a full last page needs one more, empty, to know it was last)."""
    return count // page_size + 1


def next_cursor(cursor: datetime | None, listed: Sequence[RunInfo], page_size: int) -> datetime | None:
    """Where the next incremental list starts, after listing `listed` from `cursor`.

    One page is one consistent read: its newest update is the cursor. Over several pages, a run changed meanwhile
    moves to the end and may push another past a page boundary unseen, so the cursor stops at the end of the
    first page (the next tick reads the rest again: slower, never lossy).
    """
    stamps = [info.updated_at for info in listed if info.updated_at is not None]
    if not stamps:
        return cursor
    newest = max(stamps) if len(listed) < page_size else sorted(stamps)[min(page_size, len(stamps)) - 1]
    return newest if cursor is None or newest > cursor else cursor


class ChangeFeed:
    """Reads Polyaxon's side of each tick and keeps the cursor between them (in memory: a restart lists all)."""

    def __init__(
        self,
        gateway: PolyaxonGateway,
        *,
        clock: Callable[[], datetime],
        resync_every: timedelta = RESYNC_EVERY,
        page_size: int = PAGE_SIZE,
    ) -> None:
        self.gateway = gateway
        self.clock = clock
        self.resync_every = resync_every
        self.page_size = page_size
        self._cursor: datetime | None = None
        self._synced_at: datetime | None = None
        # The `updated_at` of each run the watcher handled, while the overlap may list it again (see `handled`).
        self._handled: dict[str, datetime] = {}

    def read(self) -> RemoteView:
        """This tick's view; raises the gateway's error (the cursor stays, the next tick reads from it again)."""
        now = self.clock()
        if self._cursor is None or self._synced_at is None or now - self._synced_at >= self.resync_every:
            return self._full(now)
        try:
            listed = self.gateway.list_changed_runs(self._cursor - OVERLAP, page_size=self.page_size)
        except ProjectMissingError:
            return self._full(now)  # the whole project went: a full list says so, and every run is read once
        self._cursor = next_cursor(self._cursor, listed, self.page_size)
        requests = pages(len(listed), self.page_size)
        changed = {info.uuid: info for info in listed if not self._seen(info)}
        self._forget_handled(before=self._cursor - OVERLAP if self._cursor is not None else None)
        return RemoteView(changed, complete=False, requests=requests)

    def handled(self, info: RunInfo) -> None:
        """The watcher told all this state of the run says: listed again unchanged, an incremental view leaves it out.

        Only what was handled is left out: a run whose handling failed (or was not reached) comes again whenever the
        list shows it. A full list always carries every active run, handled or not: it is the net for a change
        that did not move `updated_at`.
        """
        if info.updated_at is not None:
            self._handled[info.uuid] = info.updated_at

    def forget(self) -> None:
        """No active run to watch: the next tick with one starts with a full list (idle ticks cost nothing)."""
        self._cursor = None
        self._handled.clear()

    def _seen(self, info: RunInfo) -> bool:
        return info.updated_at is not None and self._handled.get(info.uuid) == info.updated_at

    def _forget_handled(self, *, before: datetime | None) -> None:
        # A run last changed before the next list starts is listed again only with a newer `updated_at`.
        if before is None:
            self._handled.clear()
        else:
            self._handled = {uuid: at for uuid, at in self._handled.items() if at >= before}

    def _full(self, now: datetime) -> RemoteView:
        # The cursor is read first: a change after it is listed by the next tick, whatever this list misses.
        try:
            cursor = self.gateway.last_change()
            listed = self.gateway.list_active_runs(page_size=self.page_size)
        except ProjectMissingError:
            # A replaced server (or the project deleted in its UI) has none of the active runs: an empty complete
            # list, so the watcher reads each one once and marks what Polyaxon no longer has as lost.
            cursor, listed = None, []
        self._cursor = cursor
        self._synced_at = now
        requests = 1 + pages(len(listed), self.page_size)
        return RemoteView({info.uuid: info for info in listed}, complete=True, requests=requests)
