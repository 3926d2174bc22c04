"""Repository functions: each takes a Session and keyword arguments; no SQL lives in handlers.

One module per table family; this package re-exports them all, so callers keep writing
`from storage import repos` and `repos.create_run(...)` whichever module a function lives in.
"""

from storage.repos.approvals import (
    active_approvals,
    add_approval,
    claim_approval_request,
    create_approval_request,
    get_approval_request,
    get_approval_request_by_message,
    list_approval_requests,
    list_approvals,
    record_notice,
    registration_work,
    revoke_approval,
    update_approval_request,
)
from storage.repos.audit import add_audit, list_audit, list_audit_for_run
from storage.repos.common import DuplicateError, dialect_insert
from storage.repos.deliveries import record_delivery
from storage.repos.digests import (
    claim_digest_slot,
    complete_digest_post,
    delete_digest_schedule,
    digest_runs,
    last_digest_at,
    list_digest_schedules,
    open_approval_requests,
    release_digest_slot,
    upsert_digest_schedule,
)
from storage.repos.messages import get_posted_message, record_posted_message
from storage.repos.registrations import (
    create_registration,
    get_registration,
    list_registrations,
    registration_for_request,
)
from storage.repos.runs import (
    ACTIVE_STATUSES,
    TERMINAL_STATUSES,
    create_run,
    find_runs,
    get_run,
    get_run_by_name,
    list_active_runs,
    list_recent_runs,
    list_status_events,
    mark_status_event_posted,
    record_status,
    unposted_status_events,
    update_run,
)

__all__ = [
    "ACTIVE_STATUSES",
    "TERMINAL_STATUSES",
    "DuplicateError",
    "active_approvals",
    "add_approval",
    "add_audit",
    "claim_approval_request",
    "claim_digest_slot",
    "complete_digest_post",
    "create_approval_request",
    "create_registration",
    "create_run",
    "delete_digest_schedule",
    "dialect_insert",
    "digest_runs",
    "find_runs",
    "get_approval_request",
    "get_approval_request_by_message",
    "get_posted_message",
    "get_registration",
    "get_run",
    "get_run_by_name",
    "last_digest_at",
    "list_active_runs",
    "list_approval_requests",
    "list_approvals",
    "list_audit",
    "list_audit_for_run",
    "list_digest_schedules",
    "list_recent_runs",
    "list_registrations",
    "list_status_events",
    "mark_status_event_posted",
    "open_approval_requests",
    "record_delivery",
    "record_notice",
    "record_posted_message",
    "record_status",
    "registration_for_request",
    "registration_work",
    "release_digest_slot",
    "revoke_approval",
    "unposted_status_events",
    "update_approval_request",
    "update_run",
    "upsert_digest_schedule",
]
