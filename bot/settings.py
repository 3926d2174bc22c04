"""Settings: every environment variable of the contract, validated once and passed down.

Only the CLI reads the environment (`load_settings`); everything else receives a `Settings`.
Tests construct the groups directly.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import AliasChoices, Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite:///finetune-bot.db"

# Values people paste from templates and docs; a token like this is never real.
_PLACEHOLDER = re.compile(
    r"^(?:|x+|changeme|change-me|todo|tbd|placeholder|secret|token|xox[abp]-(?:x+|\.\.\.|your.*|<.*>)"
    r"|xapp-(?:x+|\.\.\.|your.*|<.*>)|<.*>|\$\{.*\}|your[-_ ].*)$",
    re.IGNORECASE,
)
# A user (U…, W… on Enterprise Grid) or a user group (S…): whatever else is named is refused at load, so no
# configured id is ever written into a message as anything but a mention (bot.slack.blocks.mention).
_SLACK_MEMBER = re.compile(r"[UWS][A-Z0-9]{2,}")


class SettingsError(Exception):
    """The environment does not describe a runnable bot; the message names each variable."""


def _reject_placeholder(value: SecretStr | None, what: str) -> SecretStr | None:
    if value is not None and _PLACEHOLDER.match(value.get_secret_value().strip()):
        raise ValueError(f"looks like a placeholder; set the real {what}")
    return value


def _split_ids(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


def _check_member_ids(ids: list[str]) -> list[str]:
    bad = [repr(i) for i in ids if not _SLACK_MEMBER.fullmatch(i)]
    if bad:
        raise ValueError(
            f"expected comma-separated Slack user IDs (U…/W…) or user-group IDs (S…), got {', '.join(bad)}"
        )
    return ids


class SlackSettings(BaseSettings):
    """Slack credentials and the Web API base URL (`SLACK_*`)."""

    model_config = SettingsConfigDict(env_prefix="SLACK_", extra="ignore")

    bot_token: SecretStr | None = Field(default=None, description="Bot token, xoxb-…")
    signing_secret: SecretStr | None = Field(default=None, description="Signing secret of the Slack app")
    app_token: SecretStr | None = Field(default=None, description="App-level token xapp-…; enables Socket Mode")
    api_base_url: str = Field(default="https://slack.com/api/", description="Web API base for every WebClient")

    @field_validator("bot_token")
    @classmethod
    def _bot_token(cls, v: SecretStr | None) -> SecretStr | None:
        v = _reject_placeholder(v, "bot token")
        if v is not None and not v.get_secret_value().startswith("xoxb-"):
            raise ValueError("expected a bot token starting with xoxb-")
        return v

    @field_validator("app_token")
    @classmethod
    def _app_token(cls, v: SecretStr | None) -> SecretStr | None:
        v = _reject_placeholder(v, "app-level token")
        if v is not None and not v.get_secret_value().startswith("xapp-"):
            raise ValueError("expected an app-level token starting with xapp-")
        return v

    @field_validator("signing_secret")
    @classmethod
    def _signing_secret(cls, v: SecretStr | None) -> SecretStr | None:
        return _reject_placeholder(v, "signing secret")

    @field_validator("api_base_url")
    @classmethod
    def _base_url(cls, v: str) -> str:
        if not re.match(r"^https?://", v):
            raise ValueError("expected an http(s) URL such as https://slack.com/api/")
        return v if v.endswith("/") else v + "/"

    @property
    def socket_mode(self) -> bool:
        """Socket Mode is used whenever an app-level token is configured."""
        return self.app_token is not None


class PolyaxonSettings(BaseSettings):
    """Where the Polyaxon API is and which project the bot's runs live in."""

    model_config = SettingsConfigDict(env_prefix="POLYAXON_", extra="ignore", populate_by_name=True)

    host: str | None = Field(default=None, description="Polyaxon API URL, e.g. http://polyaxon-api:80")
    auth_token: SecretStr | None = Field(default=None, description="Polyaxon API token")
    no_config: bool = Field(default=True, description="Must be true: never read a config in $HOME")
    project: str = Field(
        default="finetune",
        validation_alias=AliasChoices("FINETUNE_POLYAXON_PROJECT", "project"),
        description="Project the bot submits runs to",
    )
    owner: str = Field(
        default="default",
        validation_alias=AliasChoices("FINETUNE_POLYAXON_OWNER", "owner"),
        description="Polyaxon owner (organisation); CE has only `default`",
    )
    timeout_s: float = Field(
        default=10.0,
        gt=0,
        validation_alias=AliasChoices("FINETUNE_POLYAXON_TIMEOUT_S", "timeout_s"),
        description="Timeout of one Polyaxon API call",
    )

    @field_validator("host")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("expected an http(s) URL such as http://127.0.0.1:8000")
        return v.rstrip("/") if v else v

    @field_validator("auth_token")
    @classmethod
    def _token(cls, v: SecretStr | None) -> SecretStr | None:
        return _reject_placeholder(v, "Polyaxon token")

    @field_validator("no_config")
    @classmethod
    def _no_config(cls, v: bool) -> bool:
        if not v:
            raise ValueError("must be true: the bot never reads a Polyaxon config from $HOME")
        return v

    @field_validator("project")
    @classmethod
    def _project(cls, v: str) -> str:
        if not re.match(r"^[a-z0-9][a-z0-9-]*$", v):
            raise ValueError("expected a slug (lowercase letters, digits, dashes)")
        return v


class FinetuneSettings(BaseSettings):
    """The bot's own settings (`FINETUNE_*`)."""

    model_config = SettingsConfigDict(env_prefix="FINETUNE_", extra="ignore")

    database_url: str = Field(default=DEFAULT_DATABASE_URL, description="SQLAlchemy URL")
    catalog_dir: Path = Field(default=Path("manifests"), description="Recipes, presets, components")
    catalog_poll_s: float = Field(
        default=5.0,
        gt=0,
        description="How often the catalog folder is looked at for changes (they are taken within about this long)",
    )
    approvers: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Slack user IDs or S… user-group IDs who may approve"
    )
    approval_reaction: str = Field(default="white_check_mark", description="Reaction that approves")
    approval_quorum: int = Field(default=1, ge=1, description="Distinct approvals needed")
    approval_ttl_hours: float = Field(default=72.0, gt=0, description="Approval requests expire after this")
    runners: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="Who may submit runs; empty = everyone in the channel"
    )
    timezone: str = Field(default="UTC", description="Default timezone for digests")
    watch_interval_s: float = Field(default=10.0, gt=0, description="Watcher tick")
    stuck_after_s: float = Field(default=900.0, gt=0, description="No change in Polyaxon (metric, status) → stuck")
    watch_lease_ttl_s: float | None = Field(
        default=None,
        gt=0,
        description="How long the watcher lease lasts unrenewed (a dead replica's watcher moves on after it); "
        "default max(30 s, 3 × FINETUNE_WATCH_INTERVAL_S)",
    )
    notify: str = Field(
        default="",
        description="Where final failures are also told: a channel ID for every recipe, or RECIPE_GLOB=CHANNEL "
        "pairs, comma-separated (`sft-*=C0ALERTS1,C0DEFAULT1`); a recipe's own `notify:` wins",
    )
    release_webhook_url: str | None = Field(
        default=None, description="Where every stage change is POSTed, signed (empty: no webhook)"
    )
    release_webhook_secret: SecretStr | None = Field(
        default=None, description="HMAC-SHA256 key of the release webhook's timestamped X-Finetune-Signature (v0)"
    )
    ack_durability: Literal["process", "power"] = Field(
        default="process",
        description="What an acked Slack delivery survives: `process`, a killed bot (its record is with the "
        "database before the ack, not yet on disk: a power loss, or an OS or PostgreSQL server crash, can lose the "
        "last moments' deliveries, which Slack does not send again); `power`, a power loss too (each batch of "
        "admits waits for the disk before its acks)",
    )
    access_log: bool = Field(
        default=False,
        description="Log one INFO line for every Slack request answered (kind, status, ack time); refusals are "
        "logged at WARNING either way. Off: answered requests are logged at DEBUG, and counted and timed in "
        "/metrics; each delivery's work still logs its own line after the ack",
    )
    unsupported_run_kinds: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Polyaxon run kinds this deployment cannot execute, comma-separated (`pytorchjob` where no "
        "training operator runs, as on the local stack): `run` refuses them up front and `--dry-run` warns",
    )

    @field_validator("notify")
    @classmethod
    def _notify(cls, v: str) -> str:
        for item in filter(None, (part.strip() for part in v.split(","))):
            channel = item.rpartition("=")[2].strip()
            if not re.match(r"^[CG][A-Z0-9]{6,}$", channel):
                raise ValueError(
                    f"{item!r}: expected a channel ID (C0123ABCD) or RECIPE_GLOB=CHANNEL, e.g. sft-*=C0123ABCD"
                )
        return v

    @property
    def notify_routes(self) -> list[tuple[str, str]]:
        """(recipe glob, channel) pairs of FINETUNE_NOTIFY, in order; a bare channel is `*`."""
        routes = []
        for item in filter(None, (part.strip() for part in self.notify.split(","))):
            pattern, _, channel = item.rpartition("=")
            routes.append((pattern.strip() or "*", channel.strip()))
        return routes

    @field_validator("release_webhook_url")
    @classmethod
    def _webhook_url(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            return None
        if v is not None and not re.match(r"^https?://[^\s/]+", v):
            raise ValueError("expected an http(s) URL such as https://deploy.example.com/hooks/finetune")
        return v

    @field_validator("release_webhook_secret")
    @classmethod
    def _webhook_secret(cls, v: SecretStr | None, info: ValidationInfo) -> SecretStr | None:
        # A deployment pipeline acts on these events: an unsigned one could be forged by anyone who can reach it.
        if v is None and info.data.get("release_webhook_url"):
            raise ValueError("required when FINETUNE_RELEASE_WEBHOOK_URL is set: every event is signed with it")
        return _reject_placeholder(v, "release webhook secret")

    @field_validator("database_url")
    @classmethod
    def _db_url(cls, v: str) -> str:
        if not re.match(r"^(sqlite|postgresql(\+psycopg)?)://", v):
            raise ValueError("expected sqlite:///PATH or postgresql+psycopg://USER@HOST:PORT/DB")
        return v.replace("postgresql://", "postgresql+psycopg://", 1) if v.startswith("postgresql://") else v

    @field_validator("unsupported_run_kinds", mode="before")
    @classmethod
    def _split_kinds(cls, v: Any) -> Any:
        return [kind.lower() for kind in _split_ids(v)] if isinstance(v, str) else v

    @field_validator("unsupported_run_kinds")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        bad = [kind for kind in v if not re.match(r"^[a-z][a-z0-9_]*$", kind)]
        if bad:
            raise ValueError(f"expected Polyaxon run kinds such as pytorchjob,mpijob, got {', '.join(bad)}")
        return v

    @field_validator("approvers", "runners", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_ids(v)

    @field_validator("approvers", "runners")
    @classmethod
    def _ids(cls, v: list[str]) -> list[str]:
        return _check_member_ids(v)

    @field_validator("approval_reaction")
    @classmethod
    def _reaction(cls, v: str) -> str:
        v = v.strip(":")
        if not re.match(r"^[a-z0-9_+\-]+$", v):
            raise ValueError("expected a Slack emoji name such as white_check_mark")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError("expected an IANA timezone such as UTC or Europe/Berlin") from exc
        return v

    @property
    def watch_lease_ttl(self) -> float:
        """Seconds the watcher lease lasts unrenewed: long enough that a healthy holder renews it in time."""
        return self.watch_lease_ttl_s or max(30.0, 3 * self.watch_interval_s)

    @field_validator("watch_lease_ttl_s")
    @classmethod
    def _lease_outlasts_ticks(cls, v: float | None, info: ValidationInfo) -> float | None:
        interval = info.data.get("watch_interval_s")
        if v is not None and interval is not None and v < 2 * interval:
            raise ValueError(
                f"must be at least twice FINETUNE_WATCH_INTERVAL_S ({2 * interval:g} s), "
                "or the lease would lapse between two healthy ticks"
            )
        return v


class HttpSettings(BaseSettings):
    """Where `serve` listens in HTTP mode."""

    model_config = SettingsConfigDict(env_prefix="FINETUNE_HTTP_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = Field(default=3000, ge=1, le=65535)


class Settings(BaseSettings):
    """All settings, in groups."""

    model_config = SettingsConfigDict(extra="ignore")

    slack: SlackSettings = Field(default_factory=SlackSettings)
    polyaxon: PolyaxonSettings = Field(default_factory=PolyaxonSettings)
    finetune: FinetuneSettings = Field(default_factory=FinetuneSettings)
    http: HttpSettings = Field(default_factory=HttpSettings)

    def require_slack(self) -> None:
        """Raise SettingsError unless the Slack credentials `serve` needs are present."""
        missing = []
        if self.slack.bot_token is None:
            missing.append("SLACK_BOT_TOKEN: required; the bot token (xoxb-…) from the Slack app's OAuth page")
        if self.slack.app_token is None and self.slack.signing_secret is None:
            missing.append("SLACK_SIGNING_SECRET: required in HTTP mode (or set SLACK_APP_TOKEN for Socket Mode)")
        if missing:
            raise SettingsError("invalid settings:\n  " + "\n  ".join(missing))

    def require_polyaxon(self) -> None:
        """Raise SettingsError unless a Polyaxon host is configured."""
        if self.polyaxon.host is None:
            raise SettingsError(
                "invalid settings:\n  POLYAXON_HOST: required; the Polyaxon API URL, e.g. http://polyaxon-api:80"
            )


# Which environment variable feeds which (group, field); used to name the variable in errors.
_ENV_NAMES: dict[tuple[str, str], str] = {
    ("slack", "bot_token"): "SLACK_BOT_TOKEN",
    ("slack", "signing_secret"): "SLACK_SIGNING_SECRET",
    ("slack", "app_token"): "SLACK_APP_TOKEN",
    ("slack", "api_base_url"): "SLACK_API_BASE_URL",
    ("polyaxon", "host"): "POLYAXON_HOST",
    ("polyaxon", "auth_token"): "POLYAXON_AUTH_TOKEN",
    ("polyaxon", "no_config"): "POLYAXON_NO_CONFIG",
    ("polyaxon", "FINETUNE_POLYAXON_PROJECT"): "FINETUNE_POLYAXON_PROJECT",
    ("polyaxon", "FINETUNE_POLYAXON_OWNER"): "FINETUNE_POLYAXON_OWNER",
    ("polyaxon", "FINETUNE_POLYAXON_TIMEOUT_S"): "FINETUNE_POLYAXON_TIMEOUT_S",
}
_GROUP_PREFIX = {"finetune": "FINETUNE_", "http": "FINETUNE_HTTP_", "slack": "SLACK_", "polyaxon": "POLYAXON_"}


def _env_name(group: str, field: str) -> str:
    return _ENV_NAMES.get((group, field), _GROUP_PREFIX[group] + field.upper())


def load_settings() -> Settings:
    """Build Settings from the process environment; raise SettingsError naming each bad variable."""
    groups: dict[str, Any] = {}
    problems: list[str] = []
    for name, cls in (
        ("slack", SlackSettings),
        ("polyaxon", PolyaxonSettings),
        ("finetune", FinetuneSettings),
        ("http", HttpSettings),
    ):
        try:
            groups[name] = cls()
        except ValidationError as exc:
            for err in exc.errors():
                field = str(err["loc"][0]) if err["loc"] else "?"
                message = str(err["msg"]).removeprefix("Value error, ")
                problems.append(f"{_env_name(name, field)}: {message}")
    if problems:
        raise SettingsError("invalid settings:\n  " + "\n  ".join(problems))
    return Settings(**groups)
