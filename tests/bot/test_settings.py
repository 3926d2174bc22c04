"""Settings: every contract variable is read, and a bad one is named with what is expected."""

from __future__ import annotations

import pytest
from pydantic import SecretStr, ValidationError

from bot.settings import FinetuneSettings, Settings, SettingsError, SlackSettings, load_settings

CONTRACT_ENV = {
    "SLACK_BOT_TOKEN": "xoxb-1234-5678-abcdef",
    "SLACK_SIGNING_SECRET": "8f742231b10e8888abcd99yyyzzz85a5",
    "SLACK_APP_TOKEN": "xapp-1-A111-222-abc",
    "SLACK_API_BASE_URL": "http://127.0.0.1:9999/api",
    "FINETUNE_DATABASE_URL": "postgresql://bot@db:5432/finetune",
    "FINETUNE_CATALOG_DIR": "/etc/finetune/manifests",
    "FINETUNE_APPROVERS": "U0AAA, S0GROUP ,W0BBB",
    "FINETUNE_APPROVAL_REACTION": ":rocket:",
    "FINETUNE_APPROVAL_QUORUM": "2",
    "FINETUNE_RUNNERS": "U0CCC",
    "POLYAXON_HOST": "http://polyaxon-api:80/",
    "POLYAXON_AUTH_TOKEN": "plx-real-token-1",
    "FINETUNE_POLYAXON_PROJECT": "team-nlp",
    "POLYAXON_NO_CONFIG": "true",
    "FINETUNE_RELEASE_WEBHOOK_URL": "https://deploy.example.com/hooks/finetune",
    "FINETUNE_RELEASE_WEBHOOK_SECRET": "whsec-8f2c1d0e9a7b",
}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    import os

    for key in list(os.environ):
        if key.startswith(("SLACK_", "FINETUNE_", "POLYAXON_")):
            monkeypatch.delenv(key)
    return monkeypatch


def test_every_contract_variable_is_read(clean_env: pytest.MonkeyPatch) -> None:
    for key, value in CONTRACT_ENV.items():
        clean_env.setenv(key, value)
    s = load_settings()
    assert s.slack.bot_token is not None and s.slack.bot_token.get_secret_value() == CONTRACT_ENV["SLACK_BOT_TOKEN"]
    assert s.slack.socket_mode
    assert s.slack.api_base_url == "http://127.0.0.1:9999/api/"
    assert s.finetune.database_url == "postgresql+psycopg://bot@db:5432/finetune"
    assert str(s.finetune.catalog_dir) == "/etc/finetune/manifests"
    assert s.finetune.approvers == ["U0AAA", "S0GROUP", "W0BBB"]
    assert s.finetune.approval_reaction == "rocket"
    assert s.finetune.approval_quorum == 2
    assert s.finetune.runners == ["U0CCC"]
    assert s.polyaxon.host == "http://polyaxon-api:80"
    assert s.polyaxon.project == "team-nlp"
    assert s.polyaxon.no_config is True
    assert s.finetune.release_webhook_url == CONTRACT_ENV["FINETUNE_RELEASE_WEBHOOK_URL"]
    secret = s.finetune.release_webhook_secret
    assert secret is not None and secret.get_secret_value() == CONTRACT_ENV["FINETUNE_RELEASE_WEBHOOK_SECRET"]
    # Secrets never print.
    assert "xoxb-1234" not in repr(s) and "plx-real-token" not in str(s) and "whsec-8f2c" not in repr(s)


def test_defaults(clean_env: pytest.MonkeyPatch) -> None:
    s = load_settings()
    assert s.slack.api_base_url == "https://slack.com/api/"
    assert s.finetune.database_url == "sqlite:///finetune-bot.db"
    assert str(s.finetune.catalog_dir) == "manifests"
    assert s.finetune.approval_reaction == "white_check_mark"
    assert s.finetune.approval_quorum == 1
    assert s.finetune.runners == [] and s.finetune.approvers == []
    assert s.polyaxon.project == "finetune"
    assert s.finetune.watch_lease_ttl == 30.0
    assert not s.slack.socket_mode
    assert s.finetune.release_webhook_url is None and s.finetune.release_webhook_secret is None
    assert s.finetune.access_log is False


@pytest.mark.parametrize(
    ("var", "value", "expected"),
    [
        ("SLACK_BOT_TOKEN", "xoxb-your-token", "SLACK_BOT_TOKEN: looks like a placeholder"),
        ("SLACK_BOT_TOKEN", "xoxp-123-456", "SLACK_BOT_TOKEN: expected a bot token starting with xoxb-"),
        ("SLACK_APP_TOKEN", "xoxb-123", "SLACK_APP_TOKEN: expected an app-level token starting with xapp-"),
        ("SLACK_SIGNING_SECRET", "changeme", "SLACK_SIGNING_SECRET: looks like a placeholder"),
        ("SLACK_API_BASE_URL", "slack.com/api", "SLACK_API_BASE_URL: expected an http(s) URL"),
        ("FINETUNE_DATABASE_URL", "mysql://x", "FINETUNE_DATABASE_URL: expected sqlite:///PATH or postgresql"),
        ("FINETUNE_APPROVERS", "U0AAA,ana", "FINETUNE_APPROVERS: expected comma-separated Slack user IDs"),
        ("FINETUNE_APPROVERS", "U0DAVE><!here", "got 'U0DAVE><!here'"),
        ("FINETUNE_RUNNERS", "U0AAA,<!channel>", "FINETUNE_RUNNERS: expected comma-separated Slack user IDs"),
        ("FINETUNE_APPROVAL_QUORUM", "0", "FINETUNE_APPROVAL_QUORUM: Input should be greater than or equal to 1"),
        ("FINETUNE_APPROVAL_QUORUM", "two", "FINETUNE_APPROVAL_QUORUM: Input should be a valid integer"),
        ("FINETUNE_TIMEZONE", "Mars/Base", "FINETUNE_TIMEZONE: expected an IANA timezone"),
        ("FINETUNE_WATCH_LEASE_TTL_S", "15", "FINETUNE_WATCH_LEASE_TTL_S: must be at least twice"),
        ("POLYAXON_HOST", "polyaxon:80", "POLYAXON_HOST: expected an http(s) URL"),
        ("POLYAXON_NO_CONFIG", "false", "POLYAXON_NO_CONFIG: must be true"),
        ("FINETUNE_POLYAXON_PROJECT", "My Project", "FINETUNE_POLYAXON_PROJECT: expected a slug"),
        ("FINETUNE_RELEASE_WEBHOOK_URL", "deploy.example.com/hook", "FINETUNE_RELEASE_WEBHOOK_URL: expected an http"),
        ("FINETUNE_RELEASE_WEBHOOK_URL", "https://deploy.example.com/h", "FINETUNE_RELEASE_WEBHOOK_SECRET: required"),
        ("FINETUNE_ACCESS_LOG", "sometimes", "FINETUNE_ACCESS_LOG: Input should be a valid boolean"),
    ],
    ids=lambda v: str(v)[:30],
)
def test_bad_variable_is_named(clean_env: pytest.MonkeyPatch, var: str, value: str, expected: str) -> None:
    clean_env.setenv(var, value)
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert expected in str(err.value)
    if var in {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_SIGNING_SECRET"}:
        assert value not in str(err.value)  # a secret is never echoed back


def test_several_problems_are_reported_together(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("SLACK_BOT_TOKEN", "TODO")
    clean_env.setenv("FINETUNE_APPROVAL_QUORUM", "-1")
    with pytest.raises(SettingsError) as err:
        load_settings()
    assert "SLACK_BOT_TOKEN" in str(err.value) and "FINETUNE_APPROVAL_QUORUM" in str(err.value)


def test_require_slack_names_missing_variables() -> None:
    s = Settings(slack=SlackSettings(), finetune=FinetuneSettings())
    with pytest.raises(SettingsError, match="SLACK_BOT_TOKEN: required"):
        s.require_slack()
    ok = Settings(slack=SlackSettings(bot_token=SecretStr("xoxb-1"), signing_secret=SecretStr("abc123def")))
    ok.require_slack()
    with pytest.raises(SettingsError, match="POLYAXON_HOST: required"):
        ok.require_polyaxon()


def test_groups_are_constructed_directly_in_tests() -> None:
    with pytest.raises(ValidationError):
        SlackSettings(bot_token=SecretStr("xapp-wrong"))
    assert FinetuneSettings(approvers=["U1A", "S2B"]).approvers == ["U1A", "S2B"]
    with pytest.raises(ValidationError, match="got 'U0AAA\\\\n'"):
        FinetuneSettings(approvers=["U0AAA\n"])  # a list given directly is not stripped: the id must be exact


def test_unsupported_run_kinds_are_read_lower_cased_and_checked(clean_env: pytest.MonkeyPatch) -> None:
    assert FinetuneSettings().unsupported_run_kinds == []
    clean_env.setenv("FINETUNE_UNSUPPORTED_RUN_KINDS", " PyTorchJob, mpijob ")
    assert FinetuneSettings().unsupported_run_kinds == ["pytorchjob", "mpijob"]
    clean_env.setenv("FINETUNE_UNSUPPORTED_RUN_KINDS", "pytorchjob,tf job")
    with pytest.raises(ValidationError, match="expected Polyaxon run kinds such as pytorchjob,mpijob, got tf job"):
        FinetuneSettings()


def test_the_access_log_is_off_unless_asked_for(clean_env: pytest.MonkeyPatch) -> None:
    assert load_settings().finetune.access_log is False
    clean_env.setenv("FINETUNE_ACCESS_LOG", "true")
    assert load_settings().finetune.access_log is True
