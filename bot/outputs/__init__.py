"""Output retrieval: `/finetune outputs RUN` reads what a run wrote back from Polyaxon and checks it.

inventory.py  what was found and whether it checks out (pure: digests, completeness, confirmation)
render.py     the report posted in the run's thread
service.py    reading back through the gateway, marking the run confirmed
"""

from bot.outputs.service import OutputsService

__all__ = ["OutputsService"]
