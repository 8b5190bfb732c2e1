"""How many server processes a replica runs."""

import os

from django.conf import settings

from orbit_console.lib.env import env_int

IN_MEMORY_LAYER = "channels.layers.InMemoryChannelLayer"


def shares_channel_layer() -> bool:
    """Whether processes share live pushes: any layer but the in-memory one."""
    return bool(settings.CHANNEL_LAYERS["default"]["BACKEND"] != IN_MEMORY_LAYER)


def default_workers() -> int:
    """``ORBIT_WORKERS``, else one per core when processes can share a channel layer, else 1."""
    return env_int(
        "ORBIT_WORKERS", (os.cpu_count() or 1) if shares_channel_layer() else 1, minimum=1
    )
