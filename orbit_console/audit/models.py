"""What the audit app keeps in the database: the results of verification runs, and the list
of checkpoints written (the checkpoints themselves live outside it: ``audit/checkpoints.py``)."""

from django.db import models


class ChainVerification(models.Model):
    """One run of ``manage.py audit verify``: when, how many entries, and the first break."""

    ran_at = models.DateTimeField()
    ok = models.BooleanField()
    checked = models.PositiveBigIntegerField()
    first_break = models.TextField(blank=True)

    def __str__(self) -> str:
        return f"verification at {self.ran_at}: {'ok' if self.ok else 'BROKEN'}"


class WrittenCheckpoint(models.Model):
    """A checkpoint that was written to the folder: if the newest files go missing, the
    folder's own numbering cannot tell, this list can."""

    series = models.CharField(max_length=32)
    number = models.PositiveBigIntegerField()
    digest = models.CharField(max_length=64)
    taken_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "number"], name="checkpoint_number"),
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.number} of series {self.series}"
