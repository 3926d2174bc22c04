"""Posted messages: what the bot posted where, so it never parses its own text back."""

from __future__ import annotations

from sqlmodel import Session, col, select

from storage.models import PostedMessage


def record_posted_message(
    session: Session, *, channel: str, ts: str, purpose: str, run_id: int | None = None, thread_ts: str | None = None
) -> PostedMessage:
    """Remember a message the bot posted."""
    msg = PostedMessage(channel=channel, ts=ts, purpose=purpose, run_id=run_id, thread_ts=thread_ts)
    session.add(msg)
    session.flush()
    return msg


def get_posted_message(session: Session, *, channel: str, ts: str) -> PostedMessage | None:
    """The bot's message at (channel, ts), if it is one of ours."""
    return session.exec(select(PostedMessage).where(PostedMessage.channel == channel, PostedMessage.ts == ts)).first()


def find_posted_message(session: Session, *, run_id: int, purpose: str) -> PostedMessage | None:
    """The bot's first message of `purpose` about a run, if it posted one."""
    return session.exec(
        select(PostedMessage)
        .where(PostedMessage.run_id == run_id, PostedMessage.purpose == purpose)
        .order_by(col(PostedMessage.id))
    ).first()
