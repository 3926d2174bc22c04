"""Training health watched from chat, through the real front door and the local Polyaxon stack: a run whose
learning rate reaches NaN is alerted and, with its recipe's `alerts: {nan: stop}`, stopped and told; a GRPO run
whose every completion is clipped gets the truncation alert with a Stop button; a running card shows its progress
and ETA. The shipped tiny recipes raise no alert: the runs other end-to-end modules make are checked by
`test_no_alert_on_what_the_shipped_recipes_ran` here on runs of its own.

The test catalog adds two recipes: `sft-tiny-hot` (sft-tiny whose learning rate may go to 1e21, `nan: stop`) and
`grpo-tiny-clip` (grpo-tiny with the truncation alert its demo turns off).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.local.polyaxon import LocalPolyaxonStack
from tests.e2e.conftest import CHANNEL, REPO, LiveBot, start_live_bot
from tests.e2e.test_lifecycle import run_name_in
from tests.fixtures.slack import wait_for

pytestmark = [pytest.mark.polyaxon, pytest.mark.trainer]


def _catalog(root: Path) -> Path:
    """The shipped catalog plus the two recipes above; the repository's model and code beside it."""
    catalog = root / "manifests"
    shutil.copytree(REPO / "manifests", catalog)
    for name in (".finetune", "trainer"):
        (root / name).symlink_to(REPO / name)
    recipes = catalog / "recipes"
    sft = (recipes / "sft-tiny.yaml").read_text()
    hot = sft.replace("name: sft-tiny\n", "name: sft-tiny-hot\n")
    hot = hot.replace('"float in (0, 1e-2]"', '"float in (0, 1e21]"')
    assert hot != sft and "1e21" in hot
    (recipes / "sft-tiny-hot.yaml").write_text(hot + "alerts: {nan: stop}\n")
    grpo = (recipes / "grpo-tiny.yaml").read_text()
    # Logged every step: the windows count the logs the watcher sees, and a tiny run's steps outpace its ticks.
    clip = grpo.replace("name: grpo-tiny\n", "name: grpo-tiny-clip\n").replace("alerts: {truncation: off}\n", "")
    clip = clip.replace("  logging_steps: 2\n", "  logging_steps: 1\n")
    assert "alerts" not in clip and "logging_steps: 1" in clip
    (recipes / "grpo-tiny-clip.yaml").write_text(clip)
    return catalog


@pytest.fixture(scope="module")
def live_bot(
    polyaxon_stack: LocalPolyaxonStack, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveBot]:
    folder = tmp_path_factory.mktemp("e2e-health")
    with start_live_bot(polyaxon_stack, folder, catalog_dir=_catalog(folder)) as bot:
        yield bot


def posts(bot: LiveBot, name: str, needle: str) -> list[dict[str, object]]:
    run = bot.run_named(name)
    return [m for m in bot.standin.replies(CHANNEL, run.card_ts or "") if needle in str(m.get("text"))]


def test_a_run_that_reaches_nan_is_alerted_and_stopped_as_its_recipe_says(live_bot: LiveBot) -> None:
    name = run_name_in(live_bot.command("run recipe=sft-tiny-hot lr=1e20 max_steps=200 logging_steps=1 save_steps=1"))
    [alert] = wait_for(lambda: posts(live_bot, name, "*NaN*"), timeout=240, interval=0.5)
    text = str(alert["text"])
    assert "NaN or infinite" in text and "grad_norm" in text, text
    assert "Stopped by the recipe's `alerts: {nan: stop}`" in text, text
    assert "checkpoint=step-" in text or "no checkpoint was kept before it" in text, text
    run = live_bot.wait_status(name, {"stopped"}, timeout=120)
    card = json.dumps(live_bot.card(run).get("blocks"))
    assert ":rotating_light: *Alerts*: NaN" in card, card
    assert len(posts(live_bot, name, "*NaN*")) == 1  # told once, however many NaN rows followed
    assert (run.last_step or 0) < 200


def test_a_grpo_run_whose_every_completion_is_clipped_gets_the_truncation_alert(live_bot: LiveBot) -> None:
    # Long enough (about 25 s) to be seen running past the first write of its metrics' history (every 10 s).
    name = run_name_in(live_bot.command("run recipe=grpo-tiny-clip max_steps=300"))
    [alert] = wait_for(lambda: posts(live_bot, name, "Every completion truncated"), timeout=300, interval=0.5)
    assert "completions/clipped_ratio `1`" in str(alert["text"]) and "max_completion_length" in str(alert["text"])
    buttons = [e for b in alert.get("blocks") or [] if b.get("type") == "actions" for e in b["elements"]]  # type: ignore[union-attr]
    assert [b["text"]["text"] for b in buttons] == ["Stop"]
    run = live_bot.wait_status(name, {"succeeded"}, timeout=300)  # an alert without `stop` stops nothing
    # While it ran, its card said how far it was and when it would end.
    edits = [json.dumps(c.get("blocks")) for c in live_bot.standin.calls("chat.update") if c.get("ts") == run.card_ts]
    assert any(" %" in e and "ETA " in e for e in edits), edits[-3:]


def test_no_alert_on_what_the_shipped_recipes_ran(live_bot: LiveBot) -> None:
    names = [run_name_in(live_bot.command(f"run recipe={recipe}")) for recipe in ("sft-tiny", "grpo-tiny")]
    for name in names:
        run = live_bot.wait_status(name, {"succeeded"}, timeout=400)
        assert not (run.health or {}).get("alerted"), (name, run.health)
        assert not posts(live_bot, name, ":rotating_light:"), name
