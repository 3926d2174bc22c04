"""`form run` in the local shell: the run form (the same modal Slack shows) driven from the terminal.

    form run            open the form as `/finetune run` does, and list its fields
    KEY=VALUE           fill a field (recipe=, presets=a,b, channel=C…, or a training key); recipe= shows
                        that recipe's fields, as choosing one in Slack does; an empty value clears a field
    show                list the fields again, with what they hold and the errors the bot answered
    preview             the bot's preview (the dry run) of what is filled in
    submit              submit: the bot answers errors per field, or closes the form and starts the run
    cancel              close the form

Every step goes to the bot as Slack sends it (signed `block_actions` and `view_submission`), and the form's
state is the stand-in's, so what works here works in Slack.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bot.local.messages import Names, message_text, readable
from bot.local.slack import SlackSender, SlackStandIn
from bot.local.slack.viewing import Field

WAIT_S = 10.0
RECIPE_ACTION = "finetune_form:recipe"
PREVIEW_ACTION = "finetune_form:preview"
HELP = (__doc__ or "").split("\n\n")[1]


class FormDriver:
    """One open run form, as one person in the shell fills it in."""

    def __init__(
        self, *, sender: SlackSender, standin: SlackStandIn, user: str, say: Callable[[str], None], names: Names
    ) -> None:
        self.sender = sender
        self.standin = standin
        self.user = user
        self.say = say
        self.names = names  # how mentions, channels and links in the bot's texts read
        self.view_id: str | None = None

    @property
    def is_open(self) -> bool:
        """Whether the form is still open (a submission that passed closes it)."""
        top = self.standin.views.top(self.user)
        return top is not None and top["id"] == self.view_id

    def open(self, send_command: Callable[[str], None]) -> None:
        """`/finetune run` with nothing else, then wait for the modal and list its fields."""
        before = self.standin.views.top(self.user)
        send_command("run")
        view = self._wait(lambda: (v := self.standin.views.top(self.user)) and v != before and v)
        if view is None:
            self.say("the bot opened no form (is the catalog loaded?)")
            return
        self.view_id = view["id"]
        self.say("the run form is open: KEY=VALUE fills a field; `preview`, `submit`, `cancel`, `show`")
        self.show()

    def handle(self, line: str) -> None:
        """One line typed while the form is open."""
        assert self.view_id is not None
        if line == "show":
            self.show()
        elif line == "preview":
            self.preview()
        elif line == "submit":
            self.submit()
        elif line == "cancel":
            self.standin.views.close(self.user)
            self.say("form closed")
        elif "=" in line:
            key, _, value = line.partition("=")
            self.fill(key.strip(), value.strip())
        else:
            self.say(f"{line!r}: in the form, type KEY=VALUE, show, preview, submit or cancel")

    def fields(self) -> dict[str, Field]:
        """The form's fields by the name typed for them: recipe, channel, presets, or the training key."""
        assert self.view_id is not None
        return {name_of(f.block_id): f for f in self.standin.views.fields(self.view_id)}

    def show(self) -> None:
        """List every field: name, value, what it takes, and the bot's error for it."""
        for name, f in self.fields().items():
            value = ",".join(f.value) if isinstance(f.value, list) else (f.value or "")
            takes = (
                f"one of {', '.join(f.choices)}" if f.choices and name != "presets" else readable(f.hint, self.names)
            )
            if name == "presets":
                takes = f"any of {', '.join(f.choices)}"
            self.say(f"  {name} = {value or '(empty)'}    {takes}".rstrip())
            if f.error:
                self.say(f"    ✗ {readable(f.error, self.names)}")

    def fill(self, name: str, value: str) -> None:
        """Fill one field as a person types or picks it; `recipe=` re-renders the form."""
        assert self.view_id is not None
        found = self.fields().get(name)
        if found is None:
            self.say(f"no field {name!r}; the form has: {', '.join(self.fields())}")
            return
        entry: str | list[str] | None = value or None
        if found.kind == "multi_static_select":
            entry = [v.strip() for v in value.split(",") if v.strip()]
        try:
            self.standin.views.enter(self.view_id, found.block_id, entry)
        except ValueError as exc:  # what Slack's own client would not let a person enter
            self.say(f"Slack does not take that: {exc}")
            return
        if found.dispatch:
            before = self._hash()
            self.sender.view_action(self.view_id, found.block_id, RECIPE_ACTION)
            self._wait(lambda: self._hash() != before)
            self.show()

    def preview(self) -> None:
        """Ask the bot for the preview, print it, and go back to the form."""
        assert self.view_id is not None
        self.sender.view_action(self.view_id, "form_actions", PREVIEW_ACTION)
        pushed = self._wait(lambda: len(s := self.standin.views.open_views(self.user)) > 1 and s[-1])
        if not pushed:
            self.say("no preview came back (pick a recipe first)")
            return
        for text in message_text(pushed).splitlines():
            self.say(f"  {readable(text, self.names)}")
        self.standin.views.close(self.user)  # Back

    def submit(self) -> None:
        """Submit the form: print the bot's errors per field, or say it started."""
        assert self.view_id is not None
        sent, outcome = self.sender.submit_view(self.view_id)
        if outcome["action"] == "errors":
            self.say("the bot refused the form; fix these and submit again:")
            for block_id, message in outcome["errors"].items():
                self.say(f"  ✗ {name_of(block_id)}: {readable(message, self.names)}")
        elif outcome["action"] == "closed":
            self.say("submitted: the form closed; the bot starts the run (its card follows)")
        else:
            self.say(f"the bot answered HTTP {sent.status}: {outcome}")

    def _hash(self) -> str | None:
        top = self.standin.views.top(self.user)
        return str(top["hash"]) if top is not None else None

    @staticmethod
    def _wait(predicate: Callable[[], Any]) -> Any:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            value = predicate()
            if value:
                return value
            time.sleep(0.05)
        return None


def name_of(block_id: str) -> str:
    """What a field is called in the shell: `key:sft-tiny:lr` → lr, `presets:sft-tiny` → presets."""
    if block_id.startswith("key:"):
        return block_id.rsplit(":", 1)[-1]
    return block_id.split(":", 1)[0]
