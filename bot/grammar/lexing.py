"""What every subcommand's parser shares: the error, the scalar type, splitting and the common checks."""

from __future__ import annotations

import difflib
import math
import re
import shlex
import unicodedata

from pydantic import BaseModel, ConfigDict

Scalar = str | int | float | bool

MAX_TEXT = 2000
MAX_VALUE = 200

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

_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
# Letters and digits of any script, and -: what a name that is not a catalog name may be, so it can be refused
# with the closest catalog names rather than as a malformed word.
_UNICODE_NAME_RE = re.compile(r"^[^\W_](?:[^\W_]|-)*$")
_RUN_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
MAX_INT_DIGITS = 18
_INT_RE = re.compile(r"^[+-]?[0-9]{1,18}$")
_WHOLE_RE = re.compile(r"^[+-]?[0-9]+$")
_FLOAT_RE = re.compile(r"^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]{1,3})?$")
# A string value is one plain scalar: it may not open YAML structure, a Jinja/Polyaxon template,
# a shell construct or a second command-line flag. The first character is alphanumeric or a
# path start; the rest are drawn from a small set. Spaces are allowed (space-separated module
# lists) but `: ` and ` #` are refused because YAML would read them as a mapping or a comment.
_STR_VALUE_RE = re.compile(r"^[A-Za-z0-9./][A-Za-z0-9 ._/@+,:=-]*$")
# Shell syntax: substitutions, expansions, command separators, pipes, redirections and background jobs.
# No command the grammar accepts holds any of these characters (names, runs, numbers and plain values
# never do, and a choice value is one word), so refusing them anywhere, quoted or not, changes the
# meaning of no valid command; it only answers with the real reason instead of a confusing one.
_SHELL_RE = re.compile(r"\$\(|\$\{|\$\w*|`|&&|\|\||[;|&<>]")
# Slack sends &, < and > escaped as entities; read them back before looking for shell syntax.
_SLACK_ENTITIES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


# What a key of the grammar takes, for the reply to `key=` with nothing after it. A training key (the recipe's) is
# not listed: its type lives in the catalog, which `/finetune recipes` shows.
EXPECTS: dict[str, str] = {
    "recipe": "a recipe name, e.g. recipe=sft-tiny (see /finetune recipes)",
    "preset": "preset names, e.g. preset=cpu-small or preset=gpu-1x,spot (see /finetune presets); leave it out "
    "for the recipe's default presets",
    "lines": "a whole number of log lines, e.g. lines=100",
    "metric": "a metric name, e.g. metric=eval_loss",
    "top": "a whole number of trials, e.g. top=3",
    "checkpoint": "latest or step-N, e.g. checkpoint=step-500; leave it out for the latest",
    "max_steps": "a whole number of steps, e.g. max_steps=100",
    "model": "a model name, e.g. model=tiny-chat",
    "version": "a version name, e.g. version=v2; leave it out for the next one",
    "stage": "staging or production",
    "period": "week or month",
    "per": "week or month",
    "by": "user, recipe or preset",
    "tz": "an IANA time zone, e.g. tz=Europe/Berlin; leave it out for UTC",
    "mode": "grid or random",
    "trials": "a whole number of trials, e.g. trials=8",
    "concurrency": "a whole number of trials at once, e.g. concurrency=2",
    "sampler_seed": "a whole number, e.g. sampler_seed=7",
}
EXPECTS["presets"] = EXPECTS["preset"]


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


def fold(text: str) -> str:
    """`text` compared loosely: accents dropped (NFKD, combining marks removed) and case folded (`Tíny` -> `tiny`)."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch)).casefold()


def closest(word: str, options: list[str] | tuple[str, ...], n: int = 3) -> list[str]:
    """The valid names closest to `word`, best first (may be empty); accents and case do not count."""
    # dict.fromkeys: an option listed twice (a key and its input name alike) is suggested once.
    unique = list(dict.fromkeys(options))
    found = difflib.get_close_matches(word, unique, n=n, cutoff=0.6)
    # Then the matches with accents and case folded (`SFT-TÍNY` finds `sft-tiny`), after the exact-case ones, which
    # rank better where case carries meaning (`Etc` -> `Etc/UTC` before `WET`).
    by_fold: dict[str, str] = {}
    for option in unique:
        by_fold.setdefault(fold(option), option)
    for match in difflib.get_close_matches(fold(word), list(by_fold), n=n, cutoff=0.6):
        if by_fold[match] not in found:
            found.append(by_fold[match])
    return found[:n]


def did_you_mean(suggestions: list[str]) -> str:
    """`; did you mean a?` / `; did you mean a or b?`, or an empty string."""
    if not suggestions:
        return ""
    return "; did you mean " + " or ".join(suggestions) + "?"


def is_plain_value(text: str) -> bool:
    """True when `text` is one plain scalar that cannot open YAML, a template, a shell construct or a flag."""
    if len(text) > MAX_VALUE or "{{" in text or "{%" in text or "}}" in text or ": " in text or " #" in text:
        return False
    return bool(_STR_VALUE_RE.match(text))


def refuse_shell_syntax(text: str) -> None:
    """Raise `CommandError` when `text` holds shell syntax (`$(`, backticks, `${`, `;`, `&&`, `||`, `|`, …)."""
    for entity, char in _SLACK_ENTITIES:
        text = text.replace(entity, char)
    found = _SHELL_RE.search(text)
    if found:
        raise CommandError(
            "shell syntax is not accepted: values are plain words (letters, digits and . _ / @ + , : = -; "
            f"found {found.group()!r}); nothing you type here is run by a shell"
        )


def empty_value(key: str, subcommand: str) -> str:
    """Why `key=` with nothing after it is refused, and what the key takes (never read as "use the default")."""
    what = EXPECTS.get(key)
    if what is not None:
        return f"{key}= has no value: {key} takes {what}"
    if subcommand in ("run", "preflight", "sweep"):
        return (
            f"{key}= has no value: give {key}=VALUE, or leave {key} out for the recipe's value "
            "(`/finetune recipes` lists each recipe's keys with their types and bounds)"
        )
    return f"{key}= has no value: give {key}=VALUE (see /finetune help {subcommand})"


def int_written_as_float(key: str, text: str, value: float) -> str:
    """Why an int key refuses a number written as a float: `seed is an int: write 1000, not 1e3`."""
    if value.is_integer() and abs(value) < 1e18:
        return f"{key} is an int: write {int(value)}, not {text}"
    if _WHOLE_RE.match(text) or (math.isfinite(value) and value.is_integer()):
        # A whole number too long to be an int here (over 18 digits): its size is what is wrong, not its form.
        return f"{key}={text} is out of bounds: a whole number of at most {MAX_INT_DIGITS} digits"
    return f"{key} is an int: write a whole number, not {text}"


def scalar_text(value: object) -> str:
    """A value as the command line writes it: `true`, `0.003`, `2e-05`, `cosine` (what `parse_scalar` reads back)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


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
            if not value:
                raise CommandError(empty_value(key, subcommand))
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


def _name(value: str, what: str) -> str:
    """A recipe or preset name, matched case-insensitively: lower-cased, then checked as a slug.

    A name with letters beyond ASCII (`sft-tíny`) is passed on unchanged: no catalog name has them, so the
    catalog refuses it, suggesting the names it resembles with accents and case folded (`sft-tiny`).
    """
    if not value.isascii():
        # Checked composed (an accent typed as a separate mark is part of its letter), but never lower-cased nor
        # composed into ASCII (the Kelvin sign composes to K): that would turn a name nobody has into one that
        # exists without saying so.
        composed = unicodedata.normalize("NFC", value)
        if not _UNICODE_NAME_RE.match(composed) or len(composed) > 63:
            raise CommandError(f"{what} {value!r} is not a name (letters, digits and -)")
        return value if composed.isascii() else composed
    lowered = value.lower()
    if not _NAME_RE.match(lowered):
        raise CommandError(f"{what} {value!r} is not a name (letters, digits and -)")
    return lowered
