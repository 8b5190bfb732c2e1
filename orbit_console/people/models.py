"""The people's Orbit credentials: who acts on the platform as whom (AU6, docs/access.md).

The table keeps the name it had when the console app held the model.
"""

from django.conf import settings
from django.db import models


class OrbitCredential(models.Model):
    """An Orbit credential a person acts with, so that the platform's ``actor_id`` names them
    (AU6). A person holds at most one per namespace and sees and acts on what their credentials
    cover (docs/access.md). The token is encrypted at rest (``lib.secretbox``) and never
    rendered or logged."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="orbit_credentials"
    )
    token_ciphertext = models.TextField()
    actor_id = models.CharField(max_length=64, blank=True)
    # What the credential was issued with, when the console knows (minted by `console user`);
    # empty for a token issued elsewhere. The recovery API has the last word either way.
    permissions = models.CharField(max_length=200, blank=True)
    namespace_id = models.CharField(max_length=64, blank=True)
    # For people to read (the work queue's choice of namespace); the id when Orbit says none.
    namespace_name = models.CharField(max_length=200, blank=True, default="")
    # Space-separated queue ids the credential is limited to; empty: its whole namespace.
    queue_ids = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "console_orbitcredential"
        constraints = [
            models.UniqueConstraint(
                fields=["user", "namespace_id"], name="one_credential_per_namespace"
            ),
        ]

    def __str__(self) -> str:
        return f"Orbit credential of {self.user} in {self.namespace_id or 'a namespace'}"

    @property
    def namespace_label(self) -> str:
        """The deployment's name for the namespace, else the API's, else its id."""
        configured = settings.CONSOLE_NAMESPACE_NAMES.get(self.namespace_id, "")
        return configured or self.namespace_name or self.namespace_id

    @property
    def queue_scope(self) -> frozenset[str]:
        """The queues the credential is limited to; empty: the whole namespace."""
        return frozenset(self.queue_ids.split())


MAX_PATH = 300


class Draft(models.Model):
    """What a person had typed into a form that reached the console after their session had
    ended: kept so that, signed in again in the same browser, they find it where they left it
    (``people/drafts.py``, docs/console.md "Sessions and drafts").

    A row is one browser's draft for one page. The browser is known by the SHA-256 of a random
    key in its ``orbit_draft`` cookie (the key itself is never stored); the fields are
    encrypted at rest (``lib.secretbox``) and never hold a token; a draft is given back only to
    ``owner``, the person whose session it was, and is gone once given back or after
    ``CONSOLE_DRAFT_MINUTES``."""

    browser = models.CharField(max_length=64)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="drafts"
    )
    # Where the form was posted, and the page that shows it again (both paths of this site).
    posted_to = models.CharField(max_length=MAX_PATH)
    resume_at = models.CharField(max_length=MAX_PATH)
    fields_sealed = models.TextField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["browser", "resume_at"], name="one_draft_per_page"),
        ]

    def __str__(self) -> str:
        return f"Draft for {self.resume_at}"


class Account(models.Model):
    """What the console knows of a sign-in account beyond Django's user: which person it
    belongs to, and whether company sign-in made it (docs/approvals.md "One person, several
    accounts").

    Accounts that share ``person`` are one human being: four eyes is judged per person, so
    none of them approves or rejects what another proposed. A row exists for every company
    account (``company``, so that it is marked wherever it is named) and every linked
    account; an account without one is a console account and a person of its own. How and
    by whom an account joined its person is kept with it (``linked_how``, ``linked_by``)."""

    EMAIL = "email"  # company sign-in: the provider vouched for an e-mail address of the account
    ADMINISTRATOR = "administrator"  # manage.py console link, or the person page

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="account"
    )
    person = models.CharField(max_length=32, db_index=True)
    company = models.BooleanField(default=False)
    linked_how = models.CharField(max_length=20, blank=True, default="")
    linked_by = models.CharField(max_length=150, blank=True, default="")
    linked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"Account of person {self.person}"
