"""What serving imports: the bot, the app and a Polyaxon gateway bring none of the training stack, and none of
Polyaxon's polyaxonfile readers (Kubernetes' models) until a command compiles an operation."""

from __future__ import annotations

import os
import subprocess
import sys

SERVING = """
import sys
import bot.app, bot.web, bot.catalog
from bot.polyaxon import PolyaxonGateway
PolyaxonGateway(host="http://127.0.0.1:9", token=None, project="imports")
loaded = set(sys.modules)
heavy = {"torch", "transformers", "trl", "datasets", "peft", "tensorflow", "pandas", "kubernetes"}
print(sorted(heavy & loaded), "polyaxon._polyaxonfile.specs" in loaded)
from bot.polyaxon.spec import check_operation
try:
    check_operation({})
except Exception:
    pass
print("polyaxon._polyaxonfile.specs" in sys.modules)
"""


def test_serving_imports_no_training_stack_and_no_polyaxonfile_until_a_compile() -> None:
    env = {**os.environ, "POLYAXON_NO_CONFIG": "true"}
    out = subprocess.run(
        [sys.executable, "-c", SERVING], capture_output=True, text=True, check=True, env=env, timeout=120
    ).stdout.splitlines()
    assert out[0] == "[] False"
    assert out[1] == "True"  # the first compile imports the readers
