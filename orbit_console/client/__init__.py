"""The only bridge between the console and the recovery API: a small typed HTTP client.

The console never imports the ledger; it reaches it (embedded or external) through this
package, over HTTP, with the signed-in person's own credential.
"""

from orbit_console.client.client import OrbitClient
from orbit_console.client.errors import OrbitError, OutcomeUnknown
from orbit_console.client.types import (
    Attempt,
    CredentialInfo,
    Operation,
    OperationDetail,
    Page,
    RetryReceipt,
    RetryTaskRequest,
    ReviewReceipt,
    ReviewTaskRequest,
    Subscription,
    Task,
    TaskSummary,
)

__all__ = [
    "Attempt",
    "CredentialInfo",
    "Operation",
    "OperationDetail",
    "OrbitClient",
    "OrbitError",
    "OutcomeUnknown",
    "Page",
    "RetryReceipt",
    "RetryTaskRequest",
    "ReviewReceipt",
    "ReviewTaskRequest",
    "Subscription",
    "Task",
    "TaskSummary",
]
