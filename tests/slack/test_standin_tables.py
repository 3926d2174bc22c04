"""The stand-in refuses table blocks as Slack does: 100 rows, 20 cells a row, cells of Slack's types, one a message."""

from __future__ import annotations

from typing import Any

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.models.blocks import RawTextObject, TableBlock

from bot.local.slack import SlackStandIn
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.slack.tables import Cell, Table, table_block

C = DEFAULT_CHANNEL


@pytest.fixture
def client(slack_standin: SlackStandIn) -> WebClient:
    """A plain WebClient (no retries) on the stand-in."""
    return WebClient(base_url=slack_standin.base_url, token=slack_standin.bot_token, retry_handlers=[])


def raw(text: str = "x") -> dict[str, Any]:
    return {"type": "raw_text", "text": text}


def table(rows: int, cells: int, **fields: Any) -> dict[str, Any]:
    """A table of `rows` rows of `cells` raw_text cells, built with slack_sdk's own model."""
    grid = [[RawTextObject(text=f"{r}.{c}") for c in range(cells)] for r in range(rows)]
    return {**TableBlock(rows=grid).to_dict(), **fields}


@pytest.mark.parametrize(
    ("block", "detail"),
    [
        (table(100, 20), None),
        (table(101, 2), "no more than 100 items [json-pointer:/blocks/0/rows]"),
        (table(2, 21), "no more than 20 items [json-pointer:/blocks/0/rows/0]"),
        ({"type": "table", "rows": []}, "non-empty array of rows"),
        ({"type": "table"}, "non-empty array of rows"),
        (
            {"type": "table", "rows": [[raw(), raw()], [raw()]]},
            "same number of cells (2) [json-pointer:/blocks/0/rows/1]",
        ),
        ({"type": "table", "rows": [[raw()], []]}, "non-empty array of cells [json-pointer:/blocks/0/rows/1]"),
        ({"type": "table", "rows": [[{"type": "mrkdwn", "text": "*x*"}]]}, "raw_text or rich_text"),
        (
            {"type": "table", "rows": [[raw("")]]},
            "raw_text needs a non-empty text [json-pointer:/blocks/0/rows/0/0/text]",
        ),
        ({"type": "table", "rows": [[{"type": "rich_text", "elements": []}]]}, "rich_text needs elements"),
        (table(2, 2, column_settings=[{"align": "right"}, None]), None),
        (table(2, 2, column_settings=[{"align": "right"}] * 3), "more column settings (3) than columns (2)"),
        (table(2, 2, column_settings=[{"align": "middle"}]), "invalid column setting"),
    ],
    ids=[
        "100x20-ok",
        "101-rows",
        "21-cells",
        "no-rows",
        "rows-missing",
        "ragged",
        "empty-row",
        "mrkdwn-cell",
        "empty-text",
        "empty-rich-text",
        "settings-ok",
        "settings-over-columns",
        "bad-align",
    ],
)
def test_table_limits(client: WebClient, block: dict[str, Any], detail: str | None) -> None:
    call = lambda: client.chat_postMessage(channel=C, text="t", blocks=[block])  # noqa: E731
    if detail is None:
        assert call()["ok"] is True
        return
    with pytest.raises(SlackApiError) as info:
        call()
    assert info.value.response["error"] == "invalid_blocks"
    assert any(detail in error for error in info.value.response["errors"]), info.value.response["errors"]


def test_one_table_a_message_on_post_and_update(client: WebClient, slack_standin: SlackStandIn) -> None:
    ts = client.chat_postMessage(channel=C, text="t", blocks=[table(2, 2)])["ts"]
    for call in (
        lambda: client.chat_postMessage(channel=C, text="t", blocks=[table(2, 2), table(2, 2)]),
        lambda: client.chat_update(channel=C, ts=ts, text="t", blocks=[table(2, 2), table(3, 1)]),
    ):
        with pytest.raises(SlackApiError) as info:
            call()
        assert info.value.response["error"] == "invalid_attachments"
        assert info.value.response["errors"] == ["only_one_table_allowed"]
    assert slack_standin.message(C, ts)["blocks"][0]["rows"][1][1]["text"] == "1.1"


def test_the_bots_own_tables_pass_even_cut_to_the_limits(client: WebClient) -> None:
    wide = Table(
        header=[f"c{i}" for i in range(25)],
        rows=[[Cell(f"{r}", bold=r == 0, emoji="trophy" if r == 0 else None)] + [Cell("")] * 24 for r in range(150)],
        align={"c3": "right"},
    )
    block = table_block(wide)
    assert len(block["rows"]) == 100 and {len(row) for row in block["rows"]} == {20}
    assert client.chat_postMessage(channel=C, text="t", blocks=[block])["ok"] is True
