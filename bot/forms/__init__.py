"""The run form: `/finetune run` as a Slack modal with live fields, a preview, and per-field errors.

fields.py   the form's fields from the catalog, what was entered (type-checked), checked field by field (pure)
render.py   the form and its preview as views (pure)
seal.py     the form's context in private_metadata, signed (HMAC) so that what comes back is what the bot wrote
admit.py    whether a returned form may be used: its seal, its opener, and its run's channel (asked of Slack)
service.py  `RunForm`: open (command, Home, the rerun shortcut), update, preview, check and start
"""

from bot.forms.fields import ACTION_PREFIX, FORM_CALLBACK, OPEN_ACTION, PREVIEW_ACTION, RECIPE_ACTION, Prefill
from bot.forms.service import RunForm, form_delivery_key

__all__ = [
    "ACTION_PREFIX",
    "FORM_CALLBACK",
    "OPEN_ACTION",
    "PREVIEW_ACTION",
    "RECIPE_ACTION",
    "Prefill",
    "RunForm",
    "form_delivery_key",
]
