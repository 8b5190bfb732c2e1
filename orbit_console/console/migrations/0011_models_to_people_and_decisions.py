"""The console's models move to the people and decisions apps (their tables stay): Django's
state only."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("decisions", "0001_initial"),
        ("people", "0001_initial"),
        ("console", "0010_proposal_handler"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.RemoveConstraint(
                    model_name="approval",
                    name="one_approval_per_person",
                ),
                migrations.DeleteModel(
                    name="ChainHead",
                ),
                migrations.RemoveIndex(
                    model_name="consoleevent",
                    name="console_event_task",
                ),
                migrations.RemoveIndex(
                    model_name="consoleevent",
                    name="console_event_time",
                ),
                migrations.RemoveIndex(
                    model_name="consoleevent",
                    name="console_event_namespace",
                ),
                migrations.RemoveConstraint(
                    model_name="orbitcredential",
                    name="one_credential_per_namespace",
                ),
                migrations.RemoveIndex(
                    model_name="proposal",
                    name="proposal_queue",
                ),
                migrations.RemoveIndex(
                    model_name="submission",
                    name="submission_backlog",
                ),
                migrations.RemoveField(
                    model_name="consoleevent",
                    name="actor",
                ),
                migrations.RemoveField(
                    model_name="consoleevent",
                    name="proposal",
                ),
                migrations.RemoveField(
                    model_name="consoleevent",
                    name="submission",
                ),
                migrations.RemoveField(
                    model_name="orbitcredential",
                    name="user",
                ),
                migrations.RemoveField(
                    model_name="proposal",
                    name="decided_by",
                ),
                migrations.RemoveField(
                    model_name="proposal",
                    name="proposed_by",
                ),
                migrations.RemoveField(
                    model_name="submission",
                    name="created_by",
                ),
                migrations.RemoveField(
                    model_name="submission",
                    name="proposal",
                ),
                migrations.RemoveField(
                    model_name="submission",
                    name="sent_as",
                ),
                migrations.DeleteModel(
                    name="Approval",
                ),
                migrations.DeleteModel(
                    name="ConsoleEvent",
                ),
                migrations.DeleteModel(
                    name="OrbitCredential",
                ),
                migrations.DeleteModel(
                    name="Proposal",
                ),
                migrations.DeleteModel(
                    name="Submission",
                ),
            ],
        ),
    ]
