"""`python -m bot.local.polyaxon`: the local Polyaxon stack in the foreground."""

import sys

from bot.local.polyaxon.main import cli

sys.exit(cli())
