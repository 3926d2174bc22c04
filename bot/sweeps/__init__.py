"""Sweeps: a recipe's training keys searched as one Polyaxon matrix, one card and one leaderboard in Slack.

service.py   `/finetune sweep` (gates, record, card, submit), and status / stop / compare on a whole sweep
follow.py    each watcher tick: the trials from one request, the leaderboard edited in place, early stops,
             the sweep's status and its final summary
board.py     trials as leaderboard rows, ranked by the eval contract's metric (pure)
decide.py    when a sweep stops itself (pure)
card.py      the sweep card and the final summary (pure)
dryrun.py    `sweep … --dry-run` and the smoke-first refusal (pure)
plot.py      the metric against each swept key (matplotlib)
"""

from bot.sweeps.follow import FollowStats, SweepFollower
from bot.sweeps.service import SweepService

__all__ = ["FollowStats", "SweepFollower", "SweepService"]
