"""Who a person is at the company's identity provider."""

from django.conf import settings
from django.db import models


class OidcIdentity(models.Model):
    """The person of the console that the provider ``issuer`` knows as ``subject`` (the ID
    token's ``sub``): made at their first company sign-in, and how they are found at every
    later one (names and e-mail addresses change; ``sub`` does not)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity"
    )
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    signed_in_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_person_per_subject"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"


class OidcSession(models.Model):
    """A session of the console that began with a company sign-in, and how the provider names
    it: so that a back-channel logout naming the provider's session (``sid``) or the person
    (``sub``) finds the console's sessions to end (docs/access.md)."""

    session_key = models.CharField(max_length=40, unique=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_sessions"
    )
    sid = models.CharField(max_length=255, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"Company session of {self.user_id}"


class LogoutTokenSeen(models.Model):
    """A back-channel logout token's ``jti`` that the console has acted on: a token is
    accepted once (``signin/logout.py``); rows older than a token may be are deleted."""

    issuer = models.CharField(max_length=300)
    jti = models.CharField(max_length=255)
    seen_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "jti"], name="one_use_per_jti")]

    def __str__(self) -> str:
        return f"logout token {self.jti}"
