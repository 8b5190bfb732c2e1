"""The guard against server-side request forgery for the addresses administrators type:
a webhook's host must resolve only to public addresses, unless every address it resolves to
lies in ``CONSOLE_WEBHOOK_ALLOWED_NETWORKS`` (an administrator's explicit allow-list)."""

import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings


class Forbidden(Exception):
    """The URL may not be called; the message says why."""


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [
        ipaddress.ip_network(n, strict=False) for n in settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS
    ]


def check_url(url: str) -> None:
    """Raise ``Forbidden`` unless ``url`` is http(s) and its host resolves only to addresses
    that are public or explicitly allowed. Checked when an endpoint is saved and again before
    every delivery (an address a name resolves to can change)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Forbidden(f"not an http(s) URL: {url!r}")
    if parts.username or parts.password:
        raise Forbidden("credentials in a webhook URL are not allowed")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(parts.hostname, port, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError) as error:
        raise Forbidden(f"{parts.hostname} does not resolve: {error}") from error
    allowed = allowed_networks()
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
            address = address.ipv4_mapped
        if any(address in network for network in allowed):
            continue
        if not address.is_global or address.is_multicast:
            raise Forbidden(
                f"{parts.hostname} resolves to {address}, a loopback, link-local, private or "
                "reserved address (CONSOLE_WEBHOOK_ALLOWED_NETWORKS may allow it)"
            )
