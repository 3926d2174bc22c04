"""Slack surface tests: the stand-in, the HTTP and Socket Mode front doors, exactly-once, the manifest."""
