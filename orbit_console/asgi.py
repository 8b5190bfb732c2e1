"""ASGI entry point: HTTP through Django, WebSockets through Channels.

``daphne orbit_console.asgi:application`` serves both.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbit_console.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402 -- after Django is set up

from orbit_console.ops.static import StaticFiles  # noqa: E402

application = ProtocolTypeRouter({"http": StaticFiles(django_asgi_app)})
