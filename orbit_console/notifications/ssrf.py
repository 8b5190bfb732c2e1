"""The guard against server-side request forgery for the addresses administrators type:
a webhook's host must resolve only to public addresses, unless every address it resolves to
lies in ``CONSOLE_WEBHOOK_ALLOWED_NETWORKS`` (an administrator's explicit allow-list).

The URL is read by httpx's own parser, the one that connects: a second parser could see
another host in the same text. An IPv6 address that carries an IPv4 address (NAT64, 6to4,
IPv4-mapped, -compatible or -translated) is judged by the IPv4 address it leads to: on an
IPv6-only cluster ``[64:ff9b::a9fe:a9fe]`` reaches 169.254.169.254 through the NAT64 gateway.
"""

import asyncio
import ipaddress
import socket
from collections.abc import Iterable

import httpx
from django.conf import settings

type Address = ipaddress.IPv4Address | ipaddress.IPv6Address
type Network = ipaddress.IPv4Network | ipaddress.IPv6Network


class Forbidden(Exception):
    """The URL may not be called; the message says why."""


# Where IPv6 carries an IPv4 address in its last 32 bits: NAT64's well-known prefix (RFC 6052;
# the gateway connects to the IPv4 address), IPv4-mapped (::ffff:0:0/96), IPv4-translated
# (SIIT, ::ffff:0:0:0/96) and the deprecated IPv4-compatible addresses (::/96, RFC 4291).
_LAST_32_BITS = [
    ipaddress.IPv6Network("64:ff9b::/96"),
    ipaddress.IPv6Network("::ffff:0:0/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("::/96"),
]
# NAT64's local-use prefix (RFC 8215): where its IPv4 address sits is the operator's choice,
# so what it leads to cannot be told. Teredo (2001::/32) carries an obfuscated client address.
_NOT_TELLING = [ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("2001::/32")]
# Inside ::/96 but meaning themselves: the unspecified address and loopback.
_OWN_MEANING = frozenset({ipaddress.IPv6Address("::"), ipaddress.IPv6Address("::1")})


def allowed_networks() -> list[Network]:
    return [
        ipaddress.ip_network(n, strict=False) for n in settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS
    ]


def target(url: str) -> tuple[str, int]:
    """The host and port ``url`` leads to, as httpx reads it; ``Forbidden`` (saying why) for
    anything but an http(s) URL with a host, a port in range and no credentials."""
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError, ValueError) as error:
        raise Forbidden(f"not a valid URL: {error}") from error
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise Forbidden(f"not an http(s) URL with a host: {url[:200]!r}")
    if parsed.userinfo:
        raise Forbidden("credentials in a webhook URL are not allowed")
    port = parsed.port if parsed.port is not None else (443 if parsed.scheme == "https" else 80)
    if not 1 <= port <= 65535:
        raise Forbidden(f"port {port} is not a TCP port (1-65535)")
    return parsed.host, port


def leads_to(address: Address) -> Address:
    """The address a connection to ``address`` reaches: the IPv4 address an IPv6 one carries,
    else ``address`` itself."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.sixtofour is not None:  # 2002::/16: the 6to4 relay's IPv4 address
        return address.sixtofour
    if address not in _OWN_MEANING and any(address in network for network in _LAST_32_BITS):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def refusal(address: Address, allowed: Iterable[Network]) -> str | None:
    """Why ``address`` may not be called, or ``None`` when it may."""
    allowed = list(allowed)
    if any(address in network for network in allowed if network.version == address.version):
        return None
    if isinstance(address, ipaddress.IPv6Address) and any(address in n for n in _NOT_TELLING):
        return f"{address}, which hides the IPv4 address it leads to (NAT64 local-use, Teredo)"
    reached = leads_to(address)
    if any(reached in network for network in allowed if network.version == reached.version):
        return None
    if reached.is_global and not reached.is_multicast:
        return None
    via = f" (through {address})" if reached != address else ""
    return (
        f"{reached}{via}, a loopback, link-local, private or reserved address "
        "(CONSOLE_WEBHOOK_ALLOWED_NETWORKS may allow it)"
    )


def judge(host: str, infos: Iterable[tuple[object, ...]]) -> None:
    """``Forbidden`` unless every address ``host`` resolved to (``getaddrinfo``'s answer) may
    be called."""
    allowed = allowed_networks()
    for info in infos:
        sockaddr = info[4]
        assert isinstance(sockaddr, tuple)  # noqa: S101 -- getaddrinfo's shape for TCP
        address = ipaddress.ip_address(str(sockaddr[0]).split("%")[0])
        why = refusal(address, allowed)
        if why is not None:
            raise Forbidden(f"{host} resolves to {why}")


def check_url(url: str) -> None:
    """Raise ``Forbidden`` unless ``url`` is http(s) and its host resolves only to addresses
    that are public or explicitly allowed. Checked when an endpoint is saved and again before
    every delivery (an address a name resolves to can change)."""
    host, port = target(url)
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as error:
        raise Forbidden(f"{host} does not resolve: {error}") from error
    judge(host, infos)


async def check_url_async(url: str) -> None:
    """``check_url`` on the running loop: the resolution is part of an attempt, and of its
    deadline."""
    host, port = target(url)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError) as error:
        raise Forbidden(f"{host} does not resolve: {error}") from error
    judge(host, infos)
