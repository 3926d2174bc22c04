"""The `/finetune` command language: text in, a typed command or a `CommandError` out.

Pure: no Slack, no Polyaxon, no catalog. The parser knows the grammar of DESIGN.md and the
static list of cluster keys; which recipe keys exist, their types and bounds, and the recipe
and preset names are the catalog's business (`bot.catalog.PlanError`).
"""

from __future__ import annotations

import difflib
import re
import shlex
import zoneinfo
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

Scalar = str | int | float | bool

SUBCOMMANDS: tuple[str, ...] = (
    "run",
    "status",
    "logs",
    "compare",
    "stop",
    "resume",
    "register",
    "recipes",
    "presets",
    "digest",
    "trace",
    "help",
)

# Settings that belong to the platform team's presets, never to a training override. Compared
# after lower-casing and dropping `_`/`-`, so `node_selector`, `nodeSelector` and `node-selector`
# are one key.
CLUSTER_KEYS: frozenset[str] = frozenset(
    {
        "nodeselector",
        "node",
        "nodes",
        "nodename",
        "tolerations",
        "toleration",
        "affinity",
        "gpus",
        "gpu",
        "numgpus",
        "ngpus",
        "gpucount",
        "accelerator",
        "accelerators",
        "resources",
        "resource",
        "requests",
        "limits",
        "cpu",
        "cpus",
        "memory",
        "mem",
        "shm",
        "queue",
        "namespace",
        "replicas",
        "workers",
        "numnodes",
        "nnodes",
        "spot",
        "preemptible",
        "priority",
        "priorityclassname",
        "serviceaccount",
        "serviceaccountname",
        "connections",
        "environment",
        "runpatch",
        "labels",
        "annotations",
        "instancetype",
        "machinetype",
        "hostnetwork",
    }
)

# Pinned by the recipe, so a user cannot swap them from the command line.
PINNED_KEYS: frozenset[str] = frozenset(
    {
        "image",
        "imagedigest",
        "coderevision",
        "modelrevision",
        "datasetrevision",
        "datasetdigest",
        "component",
    }
)

DAYS: tuple[str, ...] = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FULL_DAYS: dict[str, str] = {
    "monday": "mon",
    "tuesday": "tue",
    "wednesday": "wed",
    "thursday": "thu",
    "friday": "fri",
    "saturday": "sat",
    "sunday": "sun",
}

MAX_TEXT = 2000
MAX_VALUE = 200
MAX_LOG_LINES = 1000
MAX_COMPARE = 10

_SMART_QUOTES = str.maketrans(
    {
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u00ab": '"',
        "\u00bb": '"',
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u00a0": " ",
        "\u2007": " ",
        "\u202f": " ",
        "\u2014": "--",  # Slack (macOS) turns `--dry-run` into an em dash.
        "\u2013": "--",
    }
)

_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
_RUN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_METRIC_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_./-]{0,127}$")
_INT_RE = re.compile(r"^[+-]?[0-9]{1,18}$")
_FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]{1,3})?$")
_TIME_RE = re.compile(r"^([01]?[0-9]|2[0-3]):([0-5][0-9])$")
_CHECKPOINT_RE = re.compile(r"^(latest|step-[0-9]{1,12})$")
# A string value is one plain scalar: it may not open YAML structure, a Jinja/Polyaxon template,
# a shell construct or a second command-line flag. The first character is alphanumeric or a
# path start; the rest are drawn from a small set. Spaces are allowed (space-separated module
# lists) but `: ` and ` #` are refused because YAML would read them as a mapping or a comment.
_STR_VALUE_RE = re.compile(r"^[A-Za-z0-9./][A-Za-z0-9 ._/@+,:=-]*$")


class CommandError(Exception):
    """A user error in a command: says what is wrong and the closest valid names."""

    # The message is plain text, escaped when shown; a subclass whose messages the bot writes in Slack
    # markup (mentions such as <@U…>) sets this, and must escape any user text it puts in.
    mrkdwn = False

    def __init__(self, message: str, *, suggestions: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions: list[str] = list(suggestions or [])

    def __str__(self) -> str:
        return self.message


class _Command(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class RunCommand(_Command):
    """`run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run]`."""

    name: Literal["run"] = "run"
    recipe: str
    presets: list[str] = Field(default_factory=list)
    overrides: dict[str, Scalar] = Field(default_factory=dict)
    dry_run: bool = False


class StatusCommand(_Command):
    """`status [RUN]`."""

    name: Literal["status"] = "status"
    run: str | None = None


class LogsCommand(_Command):
    """`logs RUN [lines=N]`."""

    name: Literal["logs"] = "logs"
    run: str
    lines: int = 50


class CompareCommand(_Command):
    """`compare RUN RUN… [metric=NAME] [--exploratory]`."""

    name: Literal["compare"] = "compare"
    runs: list[str]
    metric: str | None = None
    exploratory: bool = False


class StopCommand(_Command):
    """`stop RUN`."""

    name: Literal["stop"] = "stop"
    run: str


class ResumeCommand(_Command):
    """`resume RUN [checkpoint=latest|step-N]`."""

    name: Literal["resume"] = "resume"
    run: str
    checkpoint: str = "latest"


class RegisterCommand(_Command):
    """`register RUN model=NAME [version=V]`."""

    name: Literal["register"] = "register"
    run: str
    model: str
    version: str | None = None


class RecipesCommand(_Command):
    """`recipes`."""

    name: Literal["recipes"] = "recipes"


class PresetsCommand(_Command):
    """`presets`."""

    name: Literal["presets"] = "presets"


class DigestCommand(_Command):
    """`digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]`."""

    name: Literal["digest"] = "digest"
    mode: Literal["daily", "weekly", "off", "now"]
    day: str | None = None
    time: str | None = None
    tz: str | None = None


class TraceCommand(_Command):
    """`trace MODEL[:VERSION]`."""

    name: Literal["trace"] = "trace"
    model: str
    version: str | None = None


class HelpCommand(_Command):
    """`help [SUBCOMMAND]`."""

    name: Literal["help"] = "help"
    topic: str | None = None


Command = Annotated[
    RunCommand
    | StatusCommand
    | LogsCommand
    | CompareCommand
    | StopCommand
    | ResumeCommand
    | RegisterCommand
    | RecipesCommand
    | PresetsCommand
    | DigestCommand
    | TraceCommand
    | HelpCommand,
    Field(discriminator="name"),
]


def closest(word: str, options: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The valid names closest to `word`, best first (may be empty)."""
    # dict.fromkeys: an option listed twice (a key and its input name alike) is suggested once.
    return difflib.get_close_matches(word, list(dict.fromkeys(options)), n=n, cutoff=0.6)


def did_you_mean(suggestions: list[str]) -> str:
    """`; did you mean a?` / `; did you mean a or b?`, or an empty string."""
    if not suggestions:
        return ""
    return "; did you mean " + " or ".join(suggestions) + "?"


def normalize_key(key: str) -> str:
    """A key folded for comparison with the cluster and pinned key lists."""
    return re.sub(r"[_\-.]", "", key.lower())


def cluster_key_hint(key: str, value: str) -> str:
    """The preset to try instead of a cluster setting given on the command line."""
    folded = normalize_key(key.split(".", 1)[0])
    if folded in {"gpus", "gpu", "numgpus", "ngpus", "gpucount", "accelerator", "accelerators"}:
        return "preset=gpu-1x" if value.strip() == "1" else "preset=gpu-8x"
    if folded in {"spot", "preemptible", "tolerations", "toleration"}:
        return "preset=spot"
    if folded in {"cpu", "cpus", "memory", "mem"}:
        return "preset=cpu-small"
    return "one from /finetune presets"


def is_cluster_key(key: str) -> bool:
    """True when `key` (or its first dotted part) is a cluster setting."""
    return normalize_key(key.split(".", 1)[0]) in CLUSTER_KEYS


def is_plain_value(text: str) -> bool:
    """True when `text` is one plain scalar that cannot open YAML, a template, a shell construct or a flag."""
    if len(text) > MAX_VALUE or "{{" in text or "{%" in text or "}}" in text or ": " in text or " #" in text:
        return False
    return bool(_STR_VALUE_RE.match(text))


def parse_scalar(raw: str) -> Scalar:
    """Type a command-line value: bool, int, float or a safe plain string."""
    if len(raw) > MAX_VALUE:
        raise CommandError(f"value is too long ({len(raw)} characters, at most {MAX_VALUE})")
    lowered = raw.lower()
    if lowered in {"true", "yes", "on"}:
        return True
    if lowered in {"false", "no", "off"}:
        return False
    if _INT_RE.match(raw):
        return int(raw)
    if _FLOAT_RE.match(raw):
        return float(raw)
    if not raw:
        raise CommandError("empty value")
    if not is_plain_value(raw):
        raise CommandError(
            f"value {raw!r} is not a plain value: use letters, digits and . _ / @ + , : = - "
            "(no quotes, braces, brackets, templates or shell characters)"
        )
    return raw


def _split(text: str) -> list[str]:
    normalized = text.translate(_SMART_QUOTES).replace("\r", " ").replace("\n", " ").replace("\t", " ")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in normalized):
        raise CommandError("the command contains control characters")
    try:
        return shlex.split(normalized, comments=False, posix=True)
    except ValueError as exc:
        raise CommandError(f"could not read the command: {exc} (check your quotes)") from exc


def _key_values(tokens: list[str], subcommand: str) -> tuple[list[str], dict[str, str]]:
    """Split tokens into positional words and `key=value` pairs; refuse duplicate keys."""
    positional: list[str] = []
    pairs: dict[str, str] = {}
    for token in tokens:
        if "=" in token and not token.startswith("-"):
            key, _, value = token.partition("=")
            if not key:
                raise CommandError(f"{token!r}: a value without a key (write KEY=VALUE)")
            if key in pairs:
                raise CommandError(f"{key} is given twice in `{subcommand}`; give each key once")
            pairs[key] = value
        else:
            positional.append(token)
    return positional, pairs


def _flags(positional: list[str], allowed: tuple[str, ...], subcommand: str) -> tuple[list[str], set[str]]:
    words: list[str] = []
    flags: set[str] = set()
    for word in positional:
        if word.startswith("-"):
            flag = word.lstrip("-")
            spelled = "--" + flag
            if spelled not in allowed:
                options = [a.lstrip("-") for a in allowed]
                hint = did_you_mean(["--" + s for s in closest(flag, options)])
                valid = ", ".join(allowed) if allowed else "none"
                raise CommandError(
                    f"unknown flag {word!r} for `{subcommand}`{hint} (flags: {valid})",
                    suggestions=["--" + s for s in closest(flag, options)],
                )
            if spelled in flags:
                raise CommandError(f"{spelled} is given twice")
            flags.add(spelled)
        else:
            words.append(word)
    return words, flags


def _only_keys(pairs: dict[str, str], allowed: tuple[str, ...], subcommand: str) -> None:
    for key in pairs:
        if key not in allowed:
            suggestions = closest(key, allowed)
            valid = ", ".join(f"{a}=" for a in allowed) if allowed else "none"
            raise CommandError(
                f"unknown option {key!r} for `{subcommand}`{did_you_mean(suggestions)} (options: {valid})",
                suggestions=suggestions,
            )


def _run_ref(word: str) -> str:
    if not _RUN_RE.match(word):
        raise CommandError(f"{word!r} is not a run: give a run uuid, its first 8 characters, or a run name")
    return word


def _no_extra(words: list[str], subcommand: str, usage: str) -> None:
    if words:
        raise CommandError(f"unexpected {' '.join(words)!r} after `{subcommand}`; usage: {usage}")


def _slug(value: str, what: str) -> str:
    if not _NAME_RE.match(value):
        raise CommandError(f"{what} {value!r} is not a name (lower-case letters, digits and -)")
    return value


def _parse_run(tokens: list[str]) -> RunCommand:
    usage = "run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run]"
    positional, pairs = _key_values(tokens, "run")
    words, flags = _flags(positional, ("--dry-run",), "run")
    if words:
        raise CommandError(f"{words[0]!r} is not KEY=VALUE; usage: {usage}")
    recipe = pairs.pop("recipe", None)
    if recipe is None:
        raise CommandError(f"`run` needs recipe=NAME (see /finetune recipes); usage: {usage}")
    _slug(recipe, "recipe")
    presets: list[str] = []
    if "preset" in pairs and "presets" in pairs:
        raise CommandError("give presets once, as preset=a,b")
    raw_presets = pairs.pop("preset", None) or pairs.pop("presets", None)
    if raw_presets is not None:
        for name in raw_presets.split(","):
            name = name.strip()
            if not name:
                raise CommandError("empty preset name in preset=…; write preset=a,b")
            _slug(name, "preset")
            if name in presets:
                raise CommandError(f"preset {name} is listed twice")
            presets.append(name)
    overrides: dict[str, Scalar] = {}
    for key, value in pairs.items():
        folded = normalize_key(key)
        if is_cluster_key(key):
            hint = cluster_key_hint(key, value)
            raise CommandError(
                f"{key}={value} is a cluster setting; cluster settings come from presets: try {hint}",
                suggestions=[hint.removeprefix("preset=")] if hint.startswith("preset=") else [],
            )
        if folded in PINNED_KEYS:
            raise CommandError(f"{key} is pinned by the recipe and cannot be overridden; choose another recipe")
        if not _KEY_RE.match(key):
            raise CommandError(f"{key!r} is not a training key (lower-case letters, digits and _)")
        try:
            overrides[key] = parse_scalar(value)
        except CommandError as exc:
            raise CommandError(f"{key}: {exc.message}") from None
    return RunCommand(recipe=recipe, presets=presets, overrides=overrides, dry_run="--dry-run" in flags)


def _parse_status(tokens: list[str]) -> StatusCommand:
    positional, pairs = _key_values(tokens, "status")
    _only_keys(pairs, (), "status")
    words, _ = _flags(positional, (), "status")
    if len(words) > 1:
        _no_extra(words[1:], "status RUN", "status [RUN]")
    return StatusCommand(run=_run_ref(words[0]) if words else None)


def _parse_logs(tokens: list[str]) -> LogsCommand:
    usage = "logs RUN [lines=N]"
    positional, pairs = _key_values(tokens, "logs")
    _only_keys(pairs, ("lines",), "logs")
    words, _ = _flags(positional, (), "logs")
    if not words:
        raise CommandError(f"`logs` needs a RUN; usage: {usage}")
    _no_extra(words[1:], "logs RUN", usage)
    lines = 50
    if "lines" in pairs:
        raw = pairs["lines"]
        if not _INT_RE.match(raw):
            raise CommandError(f"lines={raw!r}: expected a whole number 1..{MAX_LOG_LINES}")
        lines = int(raw)
        if not 1 <= lines <= MAX_LOG_LINES:
            raise CommandError(f"lines={lines} is out of bounds: 1..{MAX_LOG_LINES}")
    return LogsCommand(run=_run_ref(words[0]), lines=lines)


def _parse_compare(tokens: list[str]) -> CompareCommand:
    usage = "compare RUN [RUN…] [metric=NAME] [--exploratory]"
    positional, pairs = _key_values(tokens, "compare")
    _only_keys(pairs, ("metric",), "compare")
    words, flags = _flags(positional, ("--exploratory",), "compare")
    runs = [_run_ref(word) for word in words]
    if not runs:
        # One run alone is compared with its recipe's recent runs on the same eval contract (the card's button).
        raise CommandError(f"`compare` needs a run (or several); usage: {usage}")
    if len(runs) > MAX_COMPARE:
        raise CommandError(f"`compare` takes at most {MAX_COMPARE} runs")
    duplicates = sorted({run for run in runs if runs.count(run) > 1})
    if duplicates:
        raise CommandError(f"run {duplicates[0]} is listed twice")
    metric = pairs.get("metric")
    if metric is not None and not _METRIC_RE.match(metric):
        raise CommandError(f"metric={metric!r} is not a metric name")
    return CompareCommand(runs=runs, metric=metric, exploratory="--exploratory" in flags)


def _parse_stop(tokens: list[str]) -> StopCommand:
    positional, pairs = _key_values(tokens, "stop")
    _only_keys(pairs, (), "stop")
    words, _ = _flags(positional, (), "stop")
    if not words:
        raise CommandError("`stop` needs a RUN; usage: stop RUN")
    _no_extra(words[1:], "stop RUN", "stop RUN")
    return StopCommand(run=_run_ref(words[0]))


def _parse_resume(tokens: list[str]) -> ResumeCommand:
    usage = "resume RUN [checkpoint=latest|step-N]"
    positional, pairs = _key_values(tokens, "resume")
    _only_keys(pairs, ("checkpoint",), "resume")
    words, _ = _flags(positional, (), "resume")
    if not words:
        raise CommandError(f"`resume` needs a RUN; usage: {usage}")
    _no_extra(words[1:], "resume RUN", usage)
    checkpoint = pairs.get("checkpoint", "latest")
    if not _CHECKPOINT_RE.match(checkpoint):
        raise CommandError(f"checkpoint={checkpoint!r}: expected latest or step-N (e.g. step-500)")
    return ResumeCommand(run=_run_ref(words[0]), checkpoint=checkpoint)


def _parse_register(tokens: list[str]) -> RegisterCommand:
    usage = "register RUN model=NAME [version=V]"
    positional, pairs = _key_values(tokens, "register")
    _only_keys(pairs, ("model", "version"), "register")
    words, _ = _flags(positional, (), "register")
    if not words:
        raise CommandError(f"`register` needs a RUN; usage: {usage}")
    _no_extra(words[1:], "register RUN", usage)
    model = pairs.get("model")
    if model is None:
        raise CommandError(f"`register` needs model=NAME; usage: {usage}")
    if not _MODEL_RE.match(model):
        raise CommandError(f"model={model!r} is not a model name (letters, digits, . _ -)")
    version = pairs.get("version")
    if version is not None and not _VERSION_RE.match(version):
        raise CommandError(f"version={version!r} is not a version (letters, digits, . _ -)")
    return RegisterCommand(run=_run_ref(words[0]), model=model, version=version)


def _parse_no_args(tokens: list[str], subcommand: str) -> None:
    if tokens:
        raise CommandError(f"`{subcommand}` takes no arguments (got {' '.join(tokens)!r})")


def _parse_tz(raw: str) -> str:
    try:
        zoneinfo.ZoneInfo(raw)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise CommandError(f"unknown time zone {raw!r} (use an IANA name such as UTC or Europe/Berlin)") from exc
    return raw


def _parse_time(raw: str) -> str:
    match = _TIME_RE.match(raw)
    if not match:
        raise CommandError(f"{raw!r} is not a time: expected HH:MM (24-hour), e.g. 09:30")
    return f"{int(match.group(1)):02d}:{match.group(2)}"


def _parse_day(raw: str) -> str:
    lowered = raw.lower()
    if lowered in FULL_DAYS:
        return FULL_DAYS[lowered]
    if lowered in DAYS:
        return lowered
    options = list(DAYS) + list(FULL_DAYS)
    suggestions = closest(lowered, options)
    raise CommandError(f"{raw!r} is not a day (mon … sun){did_you_mean(suggestions)}", suggestions=suggestions)


def _parse_digest(tokens: list[str]) -> DigestCommand:
    usage = "digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]"
    positional, pairs = _key_values(tokens, "digest")
    _only_keys(pairs, ("tz",), "digest")
    words, _ = _flags(positional, (), "digest")
    if not words:
        raise CommandError(f"`digest` needs a schedule; usage: {usage}")
    mode, rest = words[0].lower(), words[1:]
    modes = ("daily", "weekly", "off", "now")
    tz = _parse_tz(pairs["tz"]) if "tz" in pairs else None
    if mode == "daily":
        if not rest:
            raise CommandError(f"`digest daily` needs a time HH:MM; usage: {usage}")
        time = _parse_time(rest[0])
        if len(rest) > 2 or (len(rest) == 2 and tz is not None):
            _no_extra(rest[1:], "digest daily HH:MM", usage)
        if len(rest) == 2:
            tz = _parse_tz(rest[1])
        return DigestCommand(mode="daily", time=time, tz=tz)
    if mode == "weekly":
        if len(rest) < 2:
            raise CommandError(f"`digest weekly` needs a day and a time; usage: {usage}")
        day, time = _parse_day(rest[0]), _parse_time(rest[1])
        if len(rest) > 3 or (len(rest) == 3 and tz is not None):
            _no_extra(rest[2:], "digest weekly DAY HH:MM", usage)
        if len(rest) == 3:
            tz = _parse_tz(rest[2])
        return DigestCommand(mode="weekly", day=day, time=time, tz=tz)
    if mode in ("off", "now"):
        _no_extra(rest, f"digest {mode}", usage)
        if tz is not None:
            raise CommandError(f"`digest {mode}` takes no time zone")
        return DigestCommand(mode="off" if mode == "off" else "now")
    suggestions = closest(mode, modes)
    raise CommandError(
        f"no digest schedule {words[0]!r}{did_you_mean(suggestions)}; usage: {usage}", suggestions=suggestions
    )


def _parse_trace(tokens: list[str]) -> TraceCommand:
    usage = "trace MODEL[:VERSION]"
    words, _ = _flags(tokens, (), "trace")
    if not words:
        raise CommandError(f"`trace` needs a MODEL; usage: {usage}")
    _no_extra(words[1:], "trace MODEL", usage)
    model, sep, version = words[0].partition(":")
    if not _MODEL_RE.match(model):
        raise CommandError(f"{model!r} is not a model name (letters, digits, . _ -)")
    if sep and not _VERSION_RE.match(version):
        raise CommandError(f"{version!r} is not a version (letters, digits, . _ -)")
    return TraceCommand(model=model, version=version if sep else None)


def _parse_help(tokens: list[str]) -> HelpCommand:
    if not tokens:
        return HelpCommand()
    _no_extra(tokens[1:], "help SUBCOMMAND", "help [SUBCOMMAND]")
    topic = tokens[0].lower()
    if topic not in SUBCOMMANDS:
        suggestions = closest(topic, SUBCOMMANDS)
        raise CommandError(f"no help topic {tokens[0]!r}{did_you_mean(suggestions)}", suggestions=suggestions)
    return HelpCommand(topic=topic)


def _dispatch(subcommand: str, rest: list[str]) -> Command:
    if subcommand == "run":
        return _parse_run(rest)
    if subcommand == "status":
        return _parse_status(rest)
    if subcommand == "logs":
        return _parse_logs(rest)
    if subcommand == "compare":
        return _parse_compare(rest)
    if subcommand == "stop":
        return _parse_stop(rest)
    if subcommand == "resume":
        return _parse_resume(rest)
    if subcommand == "register":
        return _parse_register(rest)
    if subcommand == "recipes":
        _parse_no_args(rest, "recipes")
        return RecipesCommand()
    if subcommand == "presets":
        _parse_no_args(rest, "presets")
        return PresetsCommand()
    if subcommand == "digest":
        return _parse_digest(rest)
    if subcommand == "trace":
        return _parse_trace(rest)
    return _parse_help(rest)


def parse_command(text: str) -> Command:
    """Parse the text of a `/finetune` command into a typed command, or raise `CommandError`."""
    if len(text) > MAX_TEXT:
        raise CommandError(f"the command is too long ({len(text)} characters, at most {MAX_TEXT})")
    tokens = _split(text)
    if tokens and tokens[0] == "/finetune":
        tokens = tokens[1:]
    if not tokens:
        return HelpCommand()
    subcommand = tokens[0].lower()
    if subcommand in ("-h", "--help"):
        return _parse_help(tokens[1:])
    if subcommand not in SUBCOMMANDS:
        suggestions = closest(subcommand, SUBCOMMANDS)
        raise CommandError(
            f"no subcommand {tokens[0]!r}{did_you_mean(suggestions)} (try /finetune help)", suggestions=suggestions
        )
    return _dispatch(subcommand, tokens[1:])
