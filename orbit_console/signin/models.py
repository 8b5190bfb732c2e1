"""Who a person is at the company's identity provider."""

from django.conf import settings
from django.db import models

from orbit_console.lib.ids import new_id


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


class HeldSignin(models.Model):
    """A first company sign-in that waits for an administrator: what the provider said of the
    person matches an account already here — a name that looks like its name, or an e-mail
    address the provider did not verify — so the console does not know whether it is the same
    human being (then one person, for four eyes) or someone else. No account is made and no
    role given until an administrator decides (``manage.py console link --held ID``, or the
    person page of an account it matches); the person sees a page that says so."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    # What the provider said (cut to the columns): the name wanted, the address and whether
    # the provider vouched for it.
    name = models.CharField(max_length=150, blank=True)
    email = models.CharField(max_length=254, blank=True)
    email_verified = models.BooleanField(default=False)
    matches = models.ManyToManyField(settings.AUTH_USER_MODEL, related_name="+")
    created_at = models.DateTimeField()
    seen_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="one_hold_per_subject"),
        ]

    def __str__(self) -> str:
        return f"held company sign-in {self.id}"


class StepUpLock(models.Model):
    """A person's failed password confirmations before deciding (``/signin/confirm``): after
    ``AXES_FAILURE_LIMIT`` of them within ``AXES_COOLOFF_TIME`` that person's confirmation is
    locked until ``locked_until`` — theirs alone, never their address's (docs/sign-in.md)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, primary_key=True, related_name="+"
    )
    failures = models.PositiveIntegerField(default=0)
    first_failed_at = models.DateTimeField()
    locked_until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"step-up failures of {self.user_id}"
