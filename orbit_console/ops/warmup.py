"""What a server process prepares before it serves: the first requests after a start should
not pay for what every later one reuses.

Measured on this machine (docs/performance.md): a new worker's first decision took 280-340 ms
against 17 ms later, and its first pages several times their usual time, spent importing the
channel layer's Redis client on the first publish, compiling each template on its first
render, loading the translation catalogues and building the URL resolver's reverse map. Here
all of that is done once at start-up (``orbit_console/asgi.py``), before ``gc.freeze()`` moves
it out of the collector's way. Nothing here touches the database: the connection belongs to
the sync thread, which opens it on its first request.
"""

import logging
from pathlib import Path
from typing import Any

from channels.layers import get_channel_layer
from django.apps import apps
from django.conf import settings
from django.template import TemplateDoesNotExist, TemplateSyntaxError
from django.template.loader import get_template
from django.urls import get_resolver
from django.utils import translation

logger = logging.getLogger("orbit.ops")


def warm_up() -> dict[str, int]:
    """Prepare this process; how many templates and languages it prepared."""
    get_channel_layer()  # imports the backend (channels_redis and redis with REDIS_URL)
    resolver = get_resolver()
    resolver.reverse_dict  # noqa: B018 -- built on first access
    for namespace in resolver.namespace_dict:
        resolver.namespace_dict[namespace][1].reverse_dict  # noqa: B018
    languages = 0
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            translation.gettext("Orbit Console")  # loads the catalogue
        languages += 1
    return {"templates": _compile_templates(), "languages": languages}


def _compile_templates() -> int:
    """Every project and app template through the cached loader."""
    compiled = 0
    for name in sorted(_template_names()):
        try:
            get_template(name)
        except (TemplateDoesNotExist, TemplateSyntaxError):
            logger.warning("template not prepared: %s", name, exc_info=True)
            continue
        compiled += 1
    return compiled


def _template_names() -> set[str]:
    engines: list[dict[str, Any]] = settings.TEMPLATES
    roots = [Path(folder) for engine in engines for folder in engine.get("DIRS", [])]
    roots += [
        Path(config.path) / "templates"
        for config in apps.get_app_configs()
        if config.name.startswith("orbit_console.")
    ]
    return {
        path.relative_to(root).as_posix()
        for root in roots
        if root.is_dir()
        for path in root.rglob("*.html")
    }
