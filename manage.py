#!/usr/bin/env python
"""Django's command-line utility for Orbit Console."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbit_console.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # A configuration mistake deserves one clear line, not a traceback.
        sys.exit(f"orbit-console: {exc}")


if __name__ == "__main__":
    main()
