"""Slack plumbing every capability shares: clients, Block Kit helpers, people, thread read-back. No domain."""
