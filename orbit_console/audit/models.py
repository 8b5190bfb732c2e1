"""What the audit app keeps in the database: the results of verification runs, the list of
checkpoints written (the checkpoints themselves live outside it: ``audit/checkpoints.py``), and
the marks of the chains that moved since the last checkpoint.

The first two are append-only (``lib/appendonly.py``) and each row carries an Ed25519 signature
of the checkpoint job's key (``audit/signing.py``): the console's web process, which holds no
private key, shows only what it can check (``audit/status.py``), and a row written by hand is
named as such."""

from django.db import models


class ChainVerification(models.Model):
    """One run of ``manage.py audit verify``: when, how many entries, and the first break.

    ``statement`` is what the run signed (``audit/status.py``): only a row whose signature
    verifies, and whose columns say what its statement says, is shown by the console."""

    ran_at = models.DateTimeField()
    ok = models.BooleanField()
    checked = models.PositiveBigIntegerField()
    first_break = models.TextField(blank=True)
    statement = models.TextField(blank=True)
    key_id = models.CharField(max_length=16, blank=True)
    signature = models.CharField(max_length=128, blank=True)

    def __str__(self) -> str:
        return f"verification at {self.ran_at}: {'ok' if self.ok else 'BROKEN'}"


class WrittenCheckpoint(models.Model):
    """A checkpoint that was written to the folder: if files go missing, or the whole folder,
    the folder's own numbering cannot tell, this list can. The folder is the truth; this list
    only witnesses what it should hold. ``signature`` signs the row's columns
    (``checkpoints.listed_message``); rows written before rows were signed have none."""

    series = models.CharField(max_length=32)
    number = models.PositiveBigIntegerField()
    digest = models.CharField(max_length=64)
    taken_at = models.DateTimeField()
    key_id = models.CharField(max_length=16, blank=True)
    signature = models.CharField(max_length=128, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["series", "number"], name="checkpoint_number"),
        ]

    def __str__(self) -> str:
        return f"checkpoint {self.number} of series {self.series}"


class MovedChain(models.Model):
    """A chain that moved since the last checkpoint: one row per record appended, inserted in
    the record's own transaction (``chains.moved``). The checkpoint job signs the heads of the
    chains it finds here and then removes the rows it read, so that every record is covered by
    the next checkpoint whatever time its writer's clock gave it."""

    family = models.CharField(max_length=16)
    chain = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.family} chain {self.chain} moved"
