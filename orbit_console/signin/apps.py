from django.apps import AppConfig


class SigninConfig(AppConfig):
    name = "orbit_console.signin"
    label = "signin"
    default_auto_field = "django.db.models.BigAutoField"
