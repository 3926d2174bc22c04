"""Streamed logs: `/finetune logs RUN follow`, one follow per run across replicas, taken over when its holder goes."""

from bot.follow.loop import FollowLoop, FollowTiming
from bot.follow.service import LogFollower

__all__ = ["FollowLoop", "FollowTiming", "LogFollower"]
