"""Socket Mode end to end: apps.connections.open on the stand-in, a websocket, envelopes in, acks out."""

from __future__ import annotations

from bot.local.slack import SlackStandIn
from bot.local.slack.sender import event_envelope, reaction_event, slash_command_fields
from bot.local.slack.server import DEFAULT_CHANNEL
from bot.local.slack.viewing import submission_payload
from bot.services import Services
from tests.fixtures.slack import wait_for


def test_socket_mode_round_trip(socket_bot: Services, slack_standin: SlackStandIn) -> None:
    assert slack_standin.calls("apps.connections.open") == [{}]
    url = slack_standin.new_response_url(channel=DEFAULT_CHANNEL, user="U0ALICE01")
    fields = slash_command_fields("help", response_url=url)
    ack = slack_standin.socket_mode.deliver("slash_commands", dict(fields))
    assert ack is not None and ack["envelope_id"]
    [post] = wait_for(lambda: slack_standin.response_url_posts())
    assert post["payload"]["response_type"] == "ephemeral"

    envelope = event_envelope(
        reaction_event("reaction_added", user="U0BOB0001", channel=DEFAULT_CHANNEL, ts="1.000001", reaction="eyes")
    )
    for attempt in (0, 1):  # Slack redelivers an envelope it got no ack for: the second one is a no-op
        assert slack_standin.socket_mode.deliver("events_api", envelope, retry_attempt=attempt) is not None
    metrics = socket_bot.metrics.registry
    wait_for(lambda: metrics.get_sample_value("finetune_bot_slack_duplicate_deliveries_total", {"kind": "event"}))
    assert metrics.get_sample_value("finetune_bot_slack_acks_total", {"kind": "command"}) == 1
    # The ack counter moves just after the ack goes out: wait for it rather than race it.
    assert wait_for(lambda: metrics.get_sample_value("finetune_bot_slack_acks_total", {"kind": "event"}) == 2)


def test_the_run_form_over_socket_mode(socket_bot: Services, slack_standin: SlackStandIn) -> None:
    """views.open from a command, then a submission whose per-field errors come back in the envelope's ack."""
    url = slack_standin.new_response_url(channel=DEFAULT_CHANNEL, user="U0ALICE01")
    trigger = slack_standin.views.mint_trigger("U0ALICE01")
    slack_standin.socket_mode.deliver(
        "slash_commands", slash_command_fields("run", response_url=url, trigger_id=trigger)
    )
    view = wait_for(lambda: slack_standin.views.top("U0ALICE01"))
    with slack_standin.state.lock:
        payload = submission_payload(slack_standin.state, view["id"])
    ack = slack_standin.socket_mode.deliver("interactive", payload)
    assert ack is not None and ack["payload"] == {"response_action": "errors", "errors": {"recipe": "Choose a recipe."}}
