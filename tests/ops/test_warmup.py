"""A server process prepares, before its first request, what every request reuses (issue 12:
a new worker's first decision took 20 times its usual time)."""

from pathlib import Path

from django.conf import settings
from django.template import engines

from orbit_console.ops.warmup import warm_up


def test_every_template_is_compiled_and_every_catalogue_loaded() -> None:
    loader = engines["django"].engine.template_loaders[0]  # the cached loader
    loader.reset()
    prepared = warm_up()
    ours = list((Path(settings.BASE_DIR) / "templates").rglob("*.html"))
    assert prepared["templates"] >= len(ours) > 20
    assert prepared["languages"] == len(settings.LANGUAGES)
    cached = (
        {name for name, _ in loader.get_template_cache.items()}
        if hasattr(loader, "get_template_cache")
        else set()
    )
    for template in ours:
        name = template.relative_to(Path(settings.BASE_DIR) / "templates").as_posix()
        assert name in cached, f"{name} was not compiled"
