"""App Home through the front door: `app_home_opened` → views.publish, throttled, never more than needed."""

from __future__ import annotations

from bot.local.slack import SlackSender, SlackStandIn
from storage import repos
from tests.fixtures.slack import BotServer, wait_for

ALICE = "U0ALICE01"


def _published(standin: SlackStandIn) -> int:
    return len(standin.calls("views.publish"))


def test_opening_home_publishes_once_and_again_only_when_something_changed(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    assert sender.home_opened(ALICE).status == 200
    home = wait_for(lambda: slack_standin.views.home(ALICE))
    assert "Your active runs (0)" in str(home["blocks"]) and "Runs need Polyaxon" in str(home["blocks"])
    assert sender.home_opened(ALICE).status == 200  # opened again at once: within the 5 s per person
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert _published(slack_standin) == 1
    assert bot_server.services.home is not None
    bot_server.services.home.min_interval_s = 0.0
    sender.home_opened(ALICE)
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert _published(slack_standin) == 1  # nothing it shows changed: no publish
    with bot_server.services.sessions() as s:  # a digest in a channel alice is in
        repos.upsert_digest_schedule(s, channel="C0TRAIN01", cron="0 9 * * *", timezone="UTC", created_by=ALICE)
    sender.home_opened(ALICE)
    wait_for(lambda: _published(slack_standin) == 2)
    assert "<#C0TRAIN01>: daily at 09:00 (UTC)" in str(slack_standin.views.home(ALICE))


def test_the_messages_tab_and_a_home_tab_that_is_off_publish_nothing(
    sender: SlackSender, slack_standin: SlackStandIn, bot_server: BotServer
) -> None:
    event = {"type": "app_home_opened", "user": ALICE, "channel": "D0ALICE01", "tab": "messages"}
    assert sender.event(event).status == 200
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    assert _published(slack_standin) == 0
    slack_standin.views.set_home_enabled(False)
    sender.home_opened(ALICE)
    wait_for(lambda: bot_server.services.work.in_flight == 0)
    # Slack answered not_enabled: the error handler logged and counted it; nothing was shown, nothing retried.
    assert slack_standin.views.home(ALICE) is None
    assert bot_server.services.metrics.listener_errors.labels(kind="event")._value.get() == 1
