from django.apps import AppConfig


class PeopleConfig(AppConfig):
    name = "orbit_console.people"
    label = "people"
    verbose_name = "Orbit Console: people, their roles and Orbit credentials"
