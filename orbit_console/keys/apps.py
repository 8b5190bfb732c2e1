from django.apps import AppConfig


class KeysConfig(AppConfig):
    name = "orbit_console.keys"
    label = "keys"
    verbose_name = "Orbit Console: the keys it holds, and the end of their rotation"
