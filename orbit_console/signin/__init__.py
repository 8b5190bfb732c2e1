"""Company sign-in: OpenID Connect beside the local password sign-in (docs/sign-in.md).

mozilla-django-oidc runs the authorization code flow (PKCE, state, nonce) and verifies the ID
token against the provider's JWKS; this app finds the endpoints in the issuer's discovery
document, checks what the library leaves out (issuer, audience, expiry), maps the person's
groups to roles and namespaces (``rules.py``) at every sign-in, and provisions them.
"""
