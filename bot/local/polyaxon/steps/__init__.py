"""The steps of one run in the local process executor: init, process, logs, sync and status."""
