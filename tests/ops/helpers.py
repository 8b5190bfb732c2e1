"""Helpers of the operability tests (issue 7): a console server whose calls to its own embedded
API go through a ``FaultyProxy`` (so that a test can lose an answer on purpose), and reading
Prometheus text."""

from collections.abc import Iterator
from contextlib import contextmanager

import httpx
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.support.proxy import FaultyProxy
from tests.support.servers import DaphneServer


@contextmanager
def self_proxied_server(
    name: str, *, env: dict[str, str] | None = None
) -> Iterator[tuple[DaphneServer, FaultyProxy]]:
    """One daphne process serving the console and the API, the console reaching its own API
    through a proxy: every request and every counter of a flow lands in this one process."""
    server = DaphneServer(name, env=env)
    proxy = FaultyProxy(upstream_port=server.port)
    server.extra_env["ORBIT_EMBEDDED_API_URL"] = proxy.url
    try:
        server.start()
        yield server, proxy
    finally:
        server.stop()
        proxy.close()


def scrape(server: DaphneServer, token: str) -> list[Sample]:
    """Every sample ``/metrics`` exposes, read with the Prometheus text parser."""
    answer = httpx.get(
        f"{server.url}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain")
    return [
        sample
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    ]


def values(samples: list[Sample], name: str, **labels: str) -> list[float]:
    """The values of the samples called ``name`` whose labels include ``labels``."""
    return [
        sample.value
        for sample in samples
        if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items())
    ]


def value(samples: list[Sample], name: str, **labels: str) -> float:
    found = values(samples, name, **labels)
    assert len(found) == 1, f"{name}{labels}: {len(found)} samples"
    return found[0]
