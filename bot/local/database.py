"""The bot's database for `finetune-bot local`: inside the store, next to the Polyaxon server it describes.

The bot's rows name Polyaxon runs; kept in the working folder, one database would outlive a store or serve
two, and name runs the current server never had (a gate could pass on another store's preflight). So `local`
keeps it at STORE/finetune-bot.db and brings it to this code's schema itself, unless FINETUNE_DATABASE_URL
names one on purpose.
"""

from __future__ import annotations

from pathlib import Path

from bot.settings import Settings

STORE_DATABASE = "finetune-bot.db"


def store_database(settings: Settings, store: Path) -> tuple[Settings, bool]:
    """The settings with the database inside `store`, and whether it is there (False: FINETUNE_DATABASE_URL)."""
    if "database_url" in settings.finetune.model_fields_set:
        return settings, False
    url = f"sqlite:///{(store / STORE_DATABASE).resolve()}"
    finetune = settings.finetune.model_copy(update={"database_url": url})
    return settings.model_copy(update={"finetune": finetune}), True


def upgrade_store_database(url: str) -> str | None:
    """Create or upgrade the store's own database to this code's schema; a note when it did either."""
    from storage.db import make_engine
    from storage.migrate import current_revision, head_revision, upgrade

    engine = make_engine(url)
    try:
        before = current_revision(engine)
        if before == head_revision():
            return None
        upgrade(engine)
    finally:
        engine.dispose()
    path = url.removeprefix("sqlite:///")
    return f"created the bot's database {path}" if before is None else f"upgraded the bot's database {path}"
