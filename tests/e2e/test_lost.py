"""Runs Polyaxon no longer has, end to end: signed commands in, the real local Polyaxon and the stand-in out.

A run deleted in Polyaxon (its UI's delete, done here with Polyaxon's own client) or a project a replaced server
does not have: every command says so specifically, the run is recorded *lost* once (card and one thread post),
the watcher stops asking about it, and a submission re-creates the missing project.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import timedelta

import pytest
from polyaxon._schemas.client import ClientConfig
from polyaxon.client import PolyaxonClient, RunClient
from polyaxon.exceptions import ApiException
from sqlmodel import select

from bot.local.polyaxon import LocalPolyaxonStack
from bot.local.polyaxon.proxy import CountingProxy
from storage import repos
from storage.models import Delivery, Run
from tests.e2e.conftest import BOB, LiveBot, reply_text, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.e2e.test_registration import ask, react, status_of
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon]

GONE = "is no longer in Polyaxon at {host}: deleted there, or the server was replaced"


@pytest.fixture(scope="module")
def proxied(
    polyaxon_stack: LocalPolyaxonStack, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[LiveBot, CountingProxy]]:
    """A bot that reaches Polyaxon through a counting proxy (what it asks about which run, and Polyaxon down)."""
    with (
        CountingProxy(polyaxon_stack.host) as proxy,
        start_live_bot(polyaxon_stack, tmp_path_factory.mktemp("lost"), polyaxon_host=proxy.host) as bot,
    ):
        yield bot, proxy


def polyaxon_client(stack: LocalPolyaxonStack) -> PolyaxonClient:
    """Polyaxon's own client on the server itself (not through the bot's proxy): what its UI does, done here."""
    return PolyaxonClient(config=ClientConfig(host=stack.host, use_https=False, verify_ssl=False), token=None)


def delete_in_polyaxon(bot: LiveBot, stack: LocalPolyaxonStack, run: Run) -> None:
    """Delete the run as Polyaxon's UI does."""
    polyaxon = bot.runtime.settings.polyaxon
    client = RunClient(
        owner=polyaxon.owner, project=polyaxon.project, run_uuid=run.polyaxon_uuid, client=polyaxon_client(stack)
    )
    for attempt in range(5):
        try:
            client.delete()
            return
        except ApiException as exc:
            # The sandbox answers a spurious 405 to some overlapping writes (DESIGN.md): the UI's user clicks again.
            if exc.status != 405 or attempt == 4:
                raise
            time.sleep(0.5)


def all_carried_out(bot: LiveBot) -> bool:
    """Every delivery the bot admitted has been carried out."""
    with bot.runtime.services.sessions() as s:
        return not s.exec(select(Delivery).where(Delivery.state != "done")).first()


def lost_posts(bot: LiveBot, run: Run) -> list[str]:
    """The thread posts that tell the run is lost."""
    return [t for t in bot.thread(run) if "*Lost*" in t]


def test_every_command_on_a_run_deleted_in_polyaxon_says_so_and_the_run_is_lost_once(
    proxied: tuple[LiveBot, CountingProxy], polyaxon_stack: LocalPolyaxonStack
) -> None:
    bot, proxy = proxied
    name = run_name_in(bot.command("run recipe=quickstart epochs=1"))
    kept = run_name_in(bot.command("run recipe=quickstart epochs=1 seed=7"))  # a peer to compare with
    run = bot.wait_status(name, {"succeeded"}, timeout=240)
    bot.wait_status(kept, {"succeeded"}, timeout=240)
    delete_in_polyaxon(bot, polyaxon_stack, run)
    gone = GONE.format(host=proxy.host)
    # `register` checks the run has succeeded first: it is the first to meet the deletion, so it goes first.
    for command in (f"register {name} model=quick", f"compare {name} {kept}", f"logs {name}", f"resume {name}",
                    f"outputs {name}"):  # fmt: skip
        text = reply_text(bot.command(command))
        assert f"`{name}` {gone}" in text, (command, text)
        assert "Something went wrong" not in text
    lost = bot.wait_status(name, {"lost"})
    card = bot.wait_card(lost, "*lost*", "Polyaxon no longer has this run")
    assert "open in Polyaxon" not in str(card["blocks"])  # its page there is gone
    buttons = [e["text"]["text"] for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert "Stop" not in buttons and "Outputs" not in buttons and "Request registration" not in buttons
    assert len(lost_posts(bot, lost)) == 1, bot.thread(lost)
    # Nothing was built on it: no resumed run, no approval request.
    assert bot.newest_run().name == kept
    assert not any("approval" in t.lower() for t in bot.thread(lost))
    # Once lost, a command on it says so (and tells nothing twice); status shows the card as it now is.
    assert "is lost" in reply_text(bot.command(f"register {name} model=quick"))
    assert "lost" in reply_text(bot.command(f"status {name}"))
    assert len(lost_posts(bot, lost)) == 1


def test_the_watcher_marks_an_active_run_deleted_in_polyaxon_lost_once_and_asks_no_more(
    proxied: tuple[LiveBot, CountingProxy], polyaxon_stack: LocalPolyaxonStack
) -> None:
    bot, proxy = proxied
    # A full list every tick (the resync that finds deletions runs every 10 min otherwise).
    assert bot.runtime.watcher is not None
    bot.runtime.watcher.feed.resync_every = timedelta(0)
    name = run_name_in(bot.command("run recipe=quickstart epochs=50 hidden=1024"))
    run = bot.wait_status(name, {"created", "compiled", "queued", "scheduled", "starting", "running"}, timeout=120)
    delete_in_polyaxon(bot, polyaxon_stack, run)
    lost = bot.wait_status(name, {"lost"}, timeout=60)
    bot.wait_card(lost, "*lost*")
    assert len(lost_posts(bot, lost)) == 1
    uuid_ = lost.polyaxon_uuid
    assert uuid_
    asked = len(proxy.requests)
    time.sleep(5)  # several ticks: a lost run is no longer active, so no tick reads it (or lists for it) again
    later = [path for _, path in proxy.requests[asked:]]
    assert not [path for path in later if uuid_ in path], later
    assert len(lost_posts(bot, lost)) == 1 and bot.run_named(name).status == "lost"


def test_a_project_gone_from_polyaxon_is_created_again_and_a_waiting_run_says_why_it_waits(
    proxied: tuple[LiveBot, CountingProxy], polyaxon_stack: LocalPolyaxonStack
) -> None:
    bot, proxy = proxied
    proxy.down = True
    name = run_name_in(bot.command("run recipe=quickstart epochs=1"))
    waiting = bot.wait_status(name, {"pending_submit"}, timeout=120)
    bot.wait_card(waiting, "*Waiting*: Polyaxon has not taken it yet")
    # The server is replaced meanwhile: the bot's project is not there any more.
    polyaxon = bot.runtime.settings.polyaxon
    polyaxon_client(polyaxon_stack).projects_v1.delete_project(polyaxon.owner, polyaxon.project)
    proxy.down = False
    done = bot.wait_status(name, {"succeeded"}, timeout=240)
    assert "Waiting" not in str(bot.card(done)["blocks"])
    polyaxon_runs = bot.runtime.services.gateway.list_runs()
    assert [r.name for r in polyaxon_runs] == [name]
    wait_for(lambda: "succeeded" in str(bot.card(done)["blocks"]), timeout=30)


def test_an_approval_request_of_a_run_that_is_lost_is_voided_in_the_lost_post_and_a_late_approval_does_nothing(
    proxied: tuple[LiveBot, CountingProxy], polyaxon_stack: LocalPolyaxonStack
) -> None:
    bot, _ = proxied
    name = run_name_in(bot.command("run recipe=quickstart epochs=1 seed=11"))
    run = bot.wait_status(name, {"succeeded"}, timeout=240)
    request = ask(bot, run, "lost-model")
    delete_in_polyaxon(bot, polyaxon_stack, run)
    assert "is no longer in Polyaxon" in reply_text(bot.command(f"logs {name}"))
    lost = bot.wait_status(name, {"lost"})
    [post] = lost_posts(bot, lost)
    assert "approval request is voided" in post and "lost-model" in post, post
    voided = status_of(bot, request, {"voided"})
    assert voided.error == "its run is no longer in Polyaxon"
    assert request.message_ts is not None
    react(bot, BOB, request.message_ts)  # an approver's ✅ after the fact registers nothing
    wait_for(lambda: all_carried_out(bot))  # the reaction's delivery is carried out; nothing may have moved
    assert status_of(bot, request, {"voided"}).status == "voided"
    with bot.runtime.services.sessions() as s:
        assert not list(repos.list_registrations(s, model="lost-model"))
