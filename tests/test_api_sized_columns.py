"""Every console column that keeps a copy of a field of the recovery API holds as much as the
API allows (issue 29: business keys of 256-512 characters failed a batch's selection on
MariaDB). The API's limits are read from the embedded ledger's own models and rules, so a
limit that grows on either side without the other fails here."""

from django.db import models

from orbit_console.decisions.models import (
    Batch,
    BatchItem,
    ConsoleEvent,
    FollowUp,
    Proposal,
    Submission,
)
from orbit_console.events.models import Subscription as StreamSubscription
from orbit_console.feed.models import InboxEvent, Source
from orbit_console.insight.models import (
    DecisionFact,
    DecisionTally,
    PrecedentTally,
    Wait,
    WaitTally,
)
from orbit_console.ledger import errors
from orbit_console.ledger.models import Credential, Namespace, Task, TaskEvent
from orbit_console.lib.ids import new_request_id
from orbit_console.lib.recovery_rules import MAX_REVISION
from orbit_console.people.models import OrbitCredential


def length(model: type[models.Model], name: str) -> int:
    field = model._meta.get_field(name)
    assert isinstance(field, models.CharField), f"{model.__name__}.{name}"
    assert field.max_length is not None
    return field.max_length


ID = length(Task, "id")
REVISION_DIGITS = len(str(MAX_REVISION))  # C5: a decimal string of an unsigned 64-bit number
ERROR_CODES = [
    cls.code for cls in vars(errors).values() if isinstance(cls, type) and hasattr(cls, "code")
]

# (console model, its column, the most the API sends in it)
COPIES: list[tuple[type[models.Model], str, int]] = [
    *(
        (model, name, ID)
        for model, names in [
            (Proposal, ("task_id", "queue_id", "namespace_id")),
            (
                Submission,
                ("task_id", "queue_id", "namespace_id", "audit_id", "result_task_id"),
            ),
            (FollowUp, ("task_id", "namespace_id")),
            (ConsoleEvent, ("task_id", "queue_id", "namespace_id")),
            (Batch, ("namespace_id",)),
            (BatchItem, ("task_id", "queue_id")),
            (OrbitCredential, ("namespace_id",)),
            (Source, ("namespace_id",)),
            (InboxEvent, ("task_id",)),
            (Wait, ("task_id", "queue_id", "namespace_id", "open_task")),
            (DecisionFact, ("task_id", "queue_id", "namespace_id", "successor_task_id")),
            (DecisionTally, ("namespace_id", "queue_id")),
            (PrecedentTally, ("namespace_id", "queue_id")),
            (WaitTally, ("namespace_id", "queue_id")),
        ]
        for name in names
    ),
    *(
        (model, "handler", length(Task, "handler"))
        for model in (Submission, Wait, DecisionFact, PrecedentTally, WaitTally)
    ),
    (DecisionFact, "successor_state", length(Task, "state")),
    (OrbitCredential, "actor_id", length(Credential, "actor_id")),
    (OrbitCredential, "permissions", length(Credential, "permissions")),
    (OrbitCredential, "namespace_name", length(Namespace, "name")),
    (Proposal, "handler", length(Task, "handler")),
    (BatchItem, "handler", length(Task, "handler")),
    (BatchItem, "business_key", length(Task, "business_key")),
    (BatchItem, "seen_state", length(Task, "state")),
    (FollowUp, "state", length(Task, "state")),
    (Proposal, "expected_revision", REVISION_DIGITS),
    (Submission, "expected_revision", REVISION_DIGITS),
    (BatchItem, "seen_revision", REVISION_DIGITS),
    (Submission, "error_code", max(map(len, ERROR_CODES))),
    (BatchItem, "error_code", max(map(len, ERROR_CODES))),
    (Submission, "api_request_id", len(new_request_id())),
    (Source, "subscription_id", length(StreamSubscription, "id")),
    (Source, "label", length(StreamSubscription, "name")),
    (InboxEvent, "event_id", length(TaskEvent, "event_id")),
    (InboxEvent, "event_type", length(TaskEvent, "kind")),
    (StreamSubscription, "namespace_id", length(Namespace, "id")),
    (StreamSubscription, "actor_id", length(Credential, "actor_id")),
]


def test_every_column_copied_from_the_api_holds_what_the_api_allows() -> None:
    short = [
        f"{model.__name__}.{name}: {length(model, name)} < {limit}"
        for model, name, limit in COPIES
        if length(model, name) < limit
    ]
    assert short == []


def test_revisions_are_numbers_of_the_same_range_on_both_sides() -> None:
    """A followed task's revision is kept as a number, as the ledger keeps it."""
    assert type(FollowUp._meta.get_field("revision")) is type(Task._meta.get_field("revision"))
