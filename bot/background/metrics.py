"""`/metrics` reads the failing and parked items from the database at each scrape, so restarts lose nothing."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from storage import repos
from storage.db import SessionFactory


class BackgroundItemsCollector(Collector):
    """`finetune_bot_background_items{kind, state}`: items of each pass retried with backoff, or parked."""

    def __init__(self, sessions: SessionFactory) -> None:
        self.sessions = sessions

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One gauge sample per (pass, retrying|parked)."""
        gauge = GaugeMetricFamily(
            "finetune_bot_background_items",
            "Items of background passes that failed: still retried with backoff, or parked (given up and told)",
            labels=["kind", "state"],
        )
        with self.sessions() as s:
            counts = repos.count_item_failures(s)
        for kind, parked, count in counts:
            gauge.add_metric([kind, "parked" if parked else "retrying"], count)
        yield gauge

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """Described without a query, so registering it never touches the database."""
        yield GaugeMetricFamily("finetune_bot_background_items", "Failing background items", labels=["kind", "state"])
