from django.urls import path

from orbit_console.console.views import (
    approvals,
    audit,
    batches,
    decisions,
    queue,
    submissions,
    tasks,
    wizards,
)

app_name = "console"

urlpatterns = [
    path("", queue.work_queue, name="work_queue"),
    path("tasks/<str:task_id>", tasks.task_detail, name="task"),
    path("tasks/<str:task_id>/recovery", tasks.task_recovery, name="task_recovery"),
    path("tasks/<str:task_id>/review", wizards.review_wizard, name="review"),
    path("tasks/<str:task_id>/retry", wizards.retry_wizard, name="retry"),
    path("decisions", decisions.my_decisions, name="decisions"),
    path("submissions/<str:submission_id>", submissions.submission_detail, name="submission"),
    path(
        "submissions/<str:submission_id>/resend",
        submissions.submission_resend,
        name="submission_resend",
    ),
    path("audit", audit.explorer_page, name="audit"),
    path("audit/export.<str:fmt>", audit.export, name="audit_export"),
    path(
        "tasks/<str:task_id>/operations/<str:audit_id>",
        audit.operation_detail,
        name="operation",
    ),
    path("start", queue.start, name="start"),
    path("approvals", approvals.approvals_queue, name="approvals"),
    path("approvals/waiting", approvals.approvals_waiting, name="approvals_waiting"),
    path("proposals/<str:proposal_id>", approvals.proposal_detail, name="proposal"),
    path(
        "proposals/<str:proposal_id>/approve",
        approvals.proposal_approve_view,
        name="proposal_approve",
    ),
    path(
        "proposals/<str:proposal_id>/reject", approvals.proposal_reject_view, name="proposal_reject"
    ),
    path(
        "proposals/<str:proposal_id>/withdraw",
        approvals.proposal_withdraw_view,
        name="proposal_withdraw",
    ),
    path("batches", batches.batch_list, name="batches"),
    path("batches/new", batches.batch_new, name="batch_new"),
    path("batches/matching", batches.batch_matching, name="batch_matching"),
    path("batches/<str:batch_id>", batches.batch_detail, name="batch"),
    path("batches/<str:batch_id>/verify", batches.batch_verify_view, name="batch_verify"),
    path("batches/<str:batch_id>/discard", batches.batch_discard_view, name="batch_discard"),
    path("batches/<str:batch_id>/decide", batches.batch_decide_view, name="batch_decide"),
    path("batches/<str:batch_id>/confirm", batches.batch_confirm_view, name="batch_confirm"),
    path("batches/<str:batch_id>/approve", batches.batch_approve, name="batch_approve"),
    path("batches/<str:batch_id>/reject", batches.batch_reject, name="batch_reject"),
    path("batches/<str:batch_id>/pause", batches.batch_pause, name="batch_pause"),
    path("batches/<str:batch_id>/resume", batches.batch_resume, name="batch_resume"),
    path("batches/<str:batch_id>/cancel", batches.batch_cancel, name="batch_cancel"),
    path("batches/<str:batch_id>/outcomes.<str:fmt>", batches.batch_export, name="batch_export"),
]
