"""Issue 15: whatever arrives at the front door, it never answers 5xx and nothing ends in an internal error.

Properties over real HTTP: arbitrary bytes and headers (mostly unsigned), signed JSON of any shape
built from the fields Bolt reads, and ~300 fuzzed signed `/finetune` commands (the generator of
`bench/fuzz_front_door.py`, whose figure is 10,000 commands).
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fuzz_front_door import INTERNAL_ERROR, fuzz_texts
from bot.frontdoor.shapes import ID_FIELDS, OBJECT_FIELDS, OBJECT_LIST_FIELDS, STRING_FIELDS
from bot.grammar import wants_run_form
from bot.local.slack import SlackSender, SlackStandIn
from tests.fixtures.hostile import FORM, JSON, Trap, raw_post, sign_bytes
from tests.fixtures.slack import BotServer, wait_for

ANSWERS = {200, 400, 401, 404, 413, 415}
HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF, exclude_characters="\x7f"), max_size=40)
HYPOTHESIS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _listener_errors(server: BotServer) -> float:
    registry = server.services.metrics.registry
    return sum(registry.get_sample_value("finetune_bot_listener_errors_total", {"kind": k}) or 0.0
               for k in ("command", "event", "action", "other"))  # fmt: skip


@st.composite
def raw_requests(draw: st.DrawFn, url: str) -> tuple[bytes, dict[str, str]]:
    """Bytes of any kind, or near-Slack bodies, with content type and Slack headers each present or not."""
    body = draw(
        st.one_of(
            st.binary(max_size=2048),
            st.text(max_size=512).map(str.encode),
            st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=12).map(
                lambda d: urlencode(d).encode()
            ),
            st.dictionaries(st.text(max_size=12), st.text(max_size=40), max_size=8).map(
                lambda d: urlencode({**d, "command": "/finetune", "response_url": url}).encode()
            ),
            st.recursive(
                st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                max_leaves=20,
            ).map(lambda v: json.dumps(v).encode()),
        )
    )
    headers: dict[str, str] = {}
    content_type = draw(st.one_of(st.none(), st.sampled_from([FORM, JSON, "text/plain", f"{FORM}; x"]), HEADER_TEXT))
    if content_type is not None:
        headers["Content-Type"] = content_type
    now = str(int(time.time()))
    timestamp = draw(st.one_of(st.none(), st.just(now), st.integers(-(10**12), 10**13).map(str), HEADER_TEXT))
    if timestamp is not None:
        headers["X-Slack-Request-Timestamp"] = timestamp
    signature = draw(st.one_of(st.none(), st.just("valid"), HEADER_TEXT))
    if signature is not None:
        headers["X-Slack-Signature"] = sign_bytes(timestamp or "", body) if signature == "valid" else signature
    return body, headers


def test_no_request_makes_the_front_door_answer_5xx(bot_server: BotServer, trap: Trap) -> None:
    @HYPOTHESIS
    @given(request=raw_requests(trap.url()))
    def check(request: tuple[bytes, dict[str, str]]) -> None:
        body, headers = request
        reply = raw_post(bot_server.url, body, headers)
        assert reply.status in ANSWERS, (reply, headers)

    check()
    time.sleep(0.3)
    assert trap.hits == [] and _listener_errors(bot_server) == 0


SLACK_KEYS = sorted(
    ID_FIELDS
    | OBJECT_FIELDS
    | OBJECT_LIST_FIELDS
    | STRING_FIELDS
    | {"text", "value", "id", "is_ext_shared_channel", "is_enterprise_install", "context_team_id"}
)


def _slack_objects(url: str) -> st.SearchStrategy[dict[str, Any]]:
    """JSON objects keyed mostly by the fields Bolt reads: of the type Slack gives them, now and then of any type."""
    words = st.one_of(
        st.text(max_size=8),
        st.sampled_from(["event_callback", "block_actions", "reaction_added", "finetune_command", "help", "U0BOT0001",
                         "message", "bot_message", "app_mention", "C0TRAIN01", "T0LOCAL01", url]),
    )  # fmt: skip
    anything = st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | words,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
        max_leaves=8,
    )
    objects: st.SearchStrategy[dict[str, Any]] = st.deferred(
        lambda: st.dictionaries(st.sampled_from(SLACK_KEYS) | st.text(max_size=6), st.none(), max_size=7).flatmap(
            lambda keys: st.fixed_dictionaries({key: value_for(key) for key in keys})
        )
    )

    def value_for(key: str) -> st.SearchStrategy[Any]:
        if key in ID_FIELDS:
            typed: st.SearchStrategy[Any] = st.none() | words | objects.map(lambda o: {**o, "id": "U0ALICE01"})
        elif key in OBJECT_FIELDS:
            typed = objects
        elif key in OBJECT_LIST_FIELDS:
            typed = st.lists(objects, max_size=2)
        elif key in STRING_FIELDS:
            typed = st.none() | words
        else:
            return anything
        return st.one_of(typed, typed, typed, typed, typed, typed, typed, typed, typed, anything)

    return objects


@st.composite
def signed_payloads(draw: st.DrawFn, url: str) -> tuple[bytes, str]:
    """A JSON object (an Events API body or an interactivity payload), of a Slack type or not."""
    objects = _slack_objects(url)
    obj = draw(objects)
    obj["type"] = draw(st.sampled_from(["event_callback", "url_verification", "block_actions", "view_submission"]))
    if draw(st.integers(0, 9)) < 7:  # mostly with the skeleton of its type, so that Bolt and the listeners see it
        if obj["type"] == "event_callback":
            event_type = draw(st.sampled_from(["reaction_added", "reaction_removed", "message", "app_mention", "x"]))
            obj.update(event_id="Ev0FUZZ", event={**draw(objects), "type": event_type})
        elif obj["type"] == "block_actions":
            action_id = draw(st.sampled_from(["finetune_command", "finetune_command:logs", "other"]))
            obj["actions"] = [{**draw(objects), "action_id": action_id}, *draw(st.lists(objects, max_size=2))]
            obj["user"] = {**draw(objects), "id": "U0ALICE01"}
            obj["response_url"] = url
        elif obj["type"] == "url_verification":
            obj["challenge"] = "fuzz-challenge"
    if draw(st.booleans()):
        return json.dumps(obj).encode(), JSON
    return urlencode({"payload": json.dumps(obj)}).encode(), FORM


def test_no_signed_payload_of_any_shape_ends_in_a_5xx_or_an_internal_error(bot_server: BotServer, trap: Trap) -> None:
    """Bolt indexes what Slack documents without checking types; the front door's shape checks stand between."""

    @HYPOTHESIS
    @given(payload=signed_payloads(trap.url()))
    def check(payload: tuple[bytes, str]) -> None:
        body, content_type = payload
        now = str(int(time.time()))
        headers = {"Content-Type": content_type, "X-Slack-Request-Timestamp": now,
                   "X-Slack-Signature": sign_bytes(now, body)}  # fmt: skip
        reply = raw_post(bot_server.url, body, headers)
        assert reply.status in ANSWERS, (reply, body)

    check()
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert _listener_errors(bot_server) == 0


def test_300_fuzzed_signed_commands_end_in_no_internal_error(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    texts = fuzz_texts(300, seed=1515)
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda text: sender.slash_command(text).status, texts))
    assert statuses == [200] * len(texts)
    # `run` alone opens the run form (a modal) instead of a reply: every other text gets its reply.
    forms = [text for text in texts if wants_run_form(text)]
    replies = len(texts) - len(forms)
    posts = wait_for(lambda: (p := slack_standin.response_url_posts()) and len(p) == replies and p, timeout=60)
    if forms:
        wait_for(lambda: slack_standin.views.top("U0ALICE01"))
    assert [p for p in posts if INTERNAL_ERROR in str(p["payload"].get("text"))] == []
    assert _listener_errors(bot_server) == 0
    assert "listener failed" not in caplog.text
