"""What `compare` posts in the first run's thread: one table block, its text fallback, and a CSV past 20 columns.

A fake gateway stands in for Polyaxon (runs' outputs, no metric history); the stand-in checks what Slack would.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bot.catalog import Catalog
from bot.grammar import CompareCommand
from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.metrics import BotMetrics
from bot.polyaxon import MetricPoint, RunInfo
from bot.runs import RunService
from bot.settings import FinetuneSettings, Settings, SlackSettings
from bot.slack.client import build_web_client
from storage import repos
from storage.db import SessionFactory
from storage.models import Run

REPO = Path(__file__).resolve().parents[3]


class OutputsGateway:
    """Each run's outputs by uuid; no metric history (so no plot)."""

    def __init__(self, outputs: dict[str, dict[str, Any]]) -> None:
        self.outputs = outputs

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> RunInfo:
        return RunInfo(uuid=uuid, name="run", status="succeeded", outputs=self.outputs[uuid])

    def metric_history(self, uuid: str, names: list[str], *, max_points: int = 200) -> dict[str, list[MetricPoint]]:
        return {}


@pytest.fixture
def standin() -> Iterator[SlackStandIn]:
    s = SlackStandIn().start()
    yield s
    s.stop()


def compare(sessions: SessionFactory, standin: SlackStandIn, metrics: list[str]) -> tuple[Run, str]:
    """Two succeeded runs on one contract of `metrics`, compared; the first run and the reply."""
    scores = {"aaaa": 0.5, "bbbb": 0.75}
    outputs = {
        uuid: {"eval_contract_hash": "sha256:c", **dict.fromkeys(metrics, score)} for uuid, score in scores.items()
    }
    settings = Settings(
        slack=SlackSettings(bot_token=SecretStr(standin.bot_token), api_base_url=standin.base_url),
        finetune=FinetuneSettings(catalog_dir=REPO / "manifests"),
    )
    service = RunService(
        settings=settings,
        sessions=sessions,
        catalog=Catalog.load(REPO / "manifests"),
        gateway=OutputsGateway(outputs),  # type: ignore[arg-type]
        client=build_web_client(settings, BotMetrics()),
        clock=lambda: datetime(2026, 12, 6, 12, 0, tzinfo=UTC),
    )
    with sessions() as s:
        for uuid in scores:
            repos.create_run(
                s,
                name=f"sft-tiny-{uuid}",
                recipe_name="sft-tiny",
                recipe_hash="h",
                component="sft",
                params={"learning_rate": 0.001 if uuid == "aaaa" else 0.003},
                presets=["cpu-small"],
                pins={},
                eval_contract={"metrics": metrics, "primary_metric": metrics[0], "higher_is_better": True},
                eval_contract_hash="sha256:c",
                requester="U0ALICE01",
                channel=DEFAULT_CHANNEL,
                status="succeeded",
                polyaxon_uuid=uuid,
            )
    with sessions() as s:
        run = repos.get_run_by_name(s, name="sft-tiny-aaaa")
    assert run is not None
    service.thread.post_card(run)
    reply = service.comparer.compare(CompareCommand(runs=["sft-tiny-aaaa", "sft-tiny-bbbb"]), user="U0ALICE01")
    with sessions() as s:
        run = repos.get_run_by_name(s, name="sft-tiny-aaaa")
    assert run is not None
    return run, reply.text


def posted(standin: SlackStandIn, run: Run) -> dict[str, Any]:
    [message] = [m for m in standin.replies(DEFAULT_CHANNEL, run.card_ts or "") if "Comparison" in m["text"]]
    return message


def test_compare_posts_one_table_and_its_text_fallback(sessions: SessionFactory, standin: SlackStandIn) -> None:
    run, reply = compare(sessions, standin, ["eval_accuracy", "eval_loss"])
    assert "Posted the comparison" in reply
    message = posted(standin, run)
    [table] = [block for block in message["blocks"] if block["type"] == "table"]
    assert [cell["text"] for cell in table["rows"][0]] == [
        "run",
        "state",
        "eval_accuracy",
        "eval_loss",
        "learning_rate",
    ]
    assert table["rows"][2][0]["type"] == "rich_text"  # sft-tiny-bbbb, the best, bold with its trophy
    assert message["text"].startswith("Comparison of 2 runs (asked by <@U0ALICE01>)\n")
    assert "• `sft-tiny-bbbb` :trophy: (succeeded, final eval) eval_accuracy `0.75`" in message["text"]
    assert not [f for f in standin.files() if f["name"] == "compare.csv"]


def test_compare_past_20_columns_posts_the_first_20_and_the_whole_table_as_csv(
    sessions: SessionFactory, standin: SlackStandIn
) -> None:
    metrics = [f"task{i:02d}-acc" for i in range(22)]  # run, state, 22 metrics, learning_rate: 25 columns
    run, _ = compare(sessions, standin, metrics)
    [table] = [block for block in posted(standin, run)["blocks"] if block["type"] == "table"]
    assert {len(row) for row in table["rows"]} == {20}
    assert "the first 20 of 25 columns" in str(posted(standin, run)["blocks"])
    [csv_file] = [f for f in standin.files() if f["name"] == "compare.csv"]
    assert csv_file["thread_ts"] == run.card_ts
    lines = csv_file["content"].decode().splitlines()
    assert lines[0] == ",".join(["run", "state", *metrics, "learning_rate"])
    assert lines[2].startswith('sft-tiny-bbbb :trophy:,"succeeded, final eval",0.75,') and lines[2].endswith(",0.003")
