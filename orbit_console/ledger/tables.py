"""The ledger's tables for its hot paths, read and written in plain SQL (``lib/rows.py``):
authentication, the task reads of every call, and the writes of a review or a retry."""

from orbit_console.ledger.models import (
    Application,
    Attempt,
    AttemptReport,
    Credential,
    IdempotencyRecord,
    OperationAudit,
    Queue,
    Task,
    TaskEvent,
)
from orbit_console.lib.rows import Rows

APPLICATIONS = Rows(Application)
ATTEMPTS = Rows(Attempt)
AUDIT = Rows(OperationAudit)
CREDENTIALS = Rows(Credential)
EVENTS = Rows(TaskEvent)
QUEUES = Rows(Queue)
RECEIPTS = Rows(IdempotencyRecord)
REPORTS = Rows(AttemptReport)
TASKS = Rows(Task)
