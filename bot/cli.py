"""The `finetune-bot` console script: the only place that reads the environment."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TextIO

import click

from bot.settings import Settings, SettingsError, load_settings


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc


def _started_as_cli(argv: list[str]) -> bool:
    """Whether this process's own command line is this CLI (`finetune-bot …` or `python -m bot.cli …`), not a
    caller that runs it in-process (a test's CliRunner): only such a process may replace itself."""
    return Path(argv[1] if len(argv) > 1 else "").name == "finetune-bot" or argv[1:3] == ["-m", "bot.cli"]


def _require_migrated(settings: Settings) -> None:
    """Refuse to start on a database that is behind this code's migrations."""
    from storage.db import make_engine
    from storage.migrate import current_revision, head_revision

    engine = make_engine(settings.finetune.database_url)
    try:
        current = current_revision(engine)
    finally:
        engine.dispose()
    if current != head_revision():
        where = "has no schema" if current is None else f"is at revision {current}, this code needs {head_revision()}"
        raise click.ClickException(f"the database {where}; run `finetune-bot db upgrade` first")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--log-level", default="INFO", show_default=True, help="Python logging level.")
def main(log_level: str) -> None:
    """finetune-bot: Slack ChatOps for training runs on Polyaxon."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Alembic announces every plugin at INFO; keep its migration lines only when debugging.
    logging.getLogger("alembic").setLevel(logging.WARNING)
    # APScheduler's executor writes two INFO lines for every run of every interval job (the watcher's, the
    # deliveries', …: hundreds a minute); a job that fails is still logged, at ERROR.
    logging.getLogger("apscheduler.executors.default").setLevel(logging.WARNING)


@main.command()
@click.option("--host", default=None, help="HTTP bind address (default FINETUNE_HTTP_HOST or 127.0.0.1).")
@click.option("--port", default=None, type=int, help="HTTP port (default FINETUNE_HTTP_PORT or 3000).")
def serve(host: str | None, port: int | None) -> None:
    """Serve Slack: Socket Mode when SLACK_APP_TOKEN is set, else HTTP on /slack/events."""
    from bot.allocator import allocator_environment, tune_allocator

    environment = allocator_environment(os.environ)
    if environment is not None and _started_as_cli(sys.orig_argv):
        # glibc reads its thread cache's size only at start: the same command again, with it (same pid).
        os.execve(sys.executable, sys.orig_argv, environment)
    from bot.app import build_runtime
    from bot.catalog import CatalogError
    from bot.logwriter import logs_written_off_thread
    from bot.web import run_serve

    # Before any thread starts (the runtime starts the intake writer and the scheduler): arenas are per thread.
    tune_allocator()
    settings = _settings()
    _require_migrated(settings)
    try:
        settings.require_slack()
    except SettingsError as exc:
        raise click.ClickException(str(exc)) from exc
    # Request threads hand their lines to a writer thread (bot/logwriter.py): a write never holds up an ack.
    with logs_written_off_thread():
        try:
            runtime = build_runtime(settings)
        except CatalogError as exc:  # what is wrong, with the file and field: no traceback
            raise click.ClickException(f"the catalog {settings.finetune.catalog_dir} does not load: {exc}") from exc
        runtime.start()
        try:
            run_serve(
                settings, runtime.services, host or settings.http.host, port or settings.http.port, app=runtime.app
            )
        finally:
            runtime.stop()


@main.command()
@click.option(
    "--script",
    default=None,
    type=click.File("r"),
    help="Read shell lines from FILE (`-` for stdin) instead of the terminal; at EOF, waits for the bot's answers.",
)
@click.option(
    "--store",
    default=Path(".finetune"),
    type=click.Path(path_type=Path),
    show_default=True,
    help="Folder for everything the session keeps: the bot's database (unless FINETUNE_DATABASE_URL is set), "
    "the local Polyaxon server's database and the runs' artifacts, uploaded files, the logs.",
)
@click.option(
    "--verbose", is_flag=True, help="Show the bot's logs in the terminal too (they always go to STORE/local.log)."
)
def local(script: TextIO | None, store: Path, verbose: bool) -> None:
    """The embedded default: local Polyaxon, local Slack stand-in, SQLite and an interactive shell."""
    from bot.catalog import CatalogError
    from bot.local.database import store_database, upgrade_store_database
    from bot.local.logs import route_logs
    from bot.local.polyaxon.stack import StackError
    from bot.local.shell import interrupted, note, run_local

    settings, in_store = store_database(_settings(), store)
    # The terminal stands in for the channel: log lines would drown what a person there sees.
    log_path = route_logs(store / "local.log", verbose=verbose)
    try:
        if in_store:
            upgraded = upgrade_store_database(settings.finetune.database_url)
            if upgraded is not None:
                note(sys.stdout, upgraded)
        else:
            _require_migrated(settings)
            note(sys.stdout, f"the bot's database: {settings.finetune.database_url} (FINETUNE_DATABASE_URL)")
        code = run_local(settings, store=store, lines=script, log_path=log_path, verbose=verbose)
    except StackError as exc:
        raise click.ClickException(str(exc)) from exc
    except CatalogError as exc:  # what is wrong, with the file and field: no traceback
        raise click.ClickException(f"the catalog {settings.finetune.catalog_dir} does not load: {exc}") from exc
    except KeyboardInterrupt:
        # Ctrl-C before the shell took over (a migration, the imports): click would say "Aborted!".
        code = interrupted(sys.stdout)
    sys.exit(code)


@main.command("local-polyaxon")
@click.option("--port", default=None, type=int, help="Port of the API server (default: a free port).")
@click.option(
    "--store",
    default=Path(".finetune/polyaxon"),
    type=click.Path(path_type=Path),
    show_default=True,
    help="Folder for the server's database and the runs' artifacts.",
)
def local_polyaxon(port: int | None, store: Path) -> None:
    """Run only the local Polyaxon server and process agent, in the foreground."""
    from bot.local.polyaxon.main import main as run_local_polyaxon

    sys.exit(run_local_polyaxon(port=port, store=store))


@main.group()
def db() -> None:
    """Database schema management."""


@db.command("upgrade")
@click.option("--revision", default="head", show_default=True, help="Target revision.")
def db_upgrade(revision: str) -> None:
    """Apply the schema migrations to FINETUNE_DATABASE_URL."""
    from storage.db import make_engine
    from storage.migrate import current_revision, upgrade

    settings = _settings()
    engine = make_engine(settings.finetune.database_url)
    try:
        before = current_revision(engine)
        upgrade(engine, revision)
        after = current_revision(engine)
    finally:
        engine.dispose()
    url = engine.url.render_as_string(hide_password=True)
    if before == after:
        click.echo(f"{url}: already at revision {after}")
    else:
        click.echo(f"{url}: upgraded {before or 'empty database'} -> {after}")


@db.command("current")
def db_current() -> None:
    """Print the database's schema revision and this code's."""
    from storage.db import make_engine
    from storage.migrate import current_revision, head_revision

    settings = _settings()
    engine = make_engine(settings.finetune.database_url)
    try:
        click.echo(f"database: {current_revision(engine) or 'not migrated'}; code: {head_revision()}")
    finally:
        engine.dispose()


@main.group()
def manifests() -> None:
    """Catalog (recipes, presets, components) tools."""


@manifests.command("check")
@click.option("--catalog-dir", default=None, type=click.Path(path_type=Path), help="Default: FINETUNE_CATALOG_DIR.")
def manifests_check(catalog_dir: Path | None) -> None:
    """Validate every recipe x preset combination with Polyaxon's checker."""
    from bot.catalog import check_catalog

    folder = catalog_dir if catalog_dir is not None else _settings().finetune.catalog_dir
    problems = check_catalog(folder)
    for problem in problems:
        click.echo(f"{folder}: {problem}", err=True)
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s) in {folder}")
    click.echo(f"{folder}: every recipe x preset pair compiles")


if __name__ == "__main__":  # pragma: no cover
    main()
