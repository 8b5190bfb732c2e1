"""The package's layers (docs/architecture.md): which app may import which.

Read from the source (every ``import`` and ``from ... import`` of ``orbit_console.<app>``,
deferred imports inside functions included), so that a new import that closes a cycle fails
here before it is reviewed.
"""

import ast
from collections import defaultdict
from pathlib import Path

import orbit_console

PACKAGE = Path(orbit_console.__file__).parent
APPS = sorted(
    path.name
    for path in PACKAGE.iterdir()
    if path.is_dir() and (path / "__init__.py").exists() and path.name != "locale"
)
# Who may import whom: every import between two of the package's apps is listed here.
ALLOWED = {
    "lib": set(),
    "ops": {"lib"},
    "client": {"lib", "ops"},
    "audit": {"lib", "ops"},
    "ledger": {"audit", "lib", "ops"},
    "events": {"ledger", "lib", "ops"},
    "people": {"client", "ledger", "lib"},
    "signin": {"ledger", "lib", "ops", "people"},
    "decisions": {"audit", "client", "lib", "ops", "people"},
    "feed": {"client", "decisions", "ledger", "lib", "ops", "people"},
    "console": {
        "audit",
        "client",
        "decisions",
        "feed",
        "ledger",
        "lib",
        "ops",
        "people",
        "signin",
    },
    "timeline": {"client", "console", "decisions", "feed", "lib", "ops", "people"},
    "notifications": {"audit", "decisions", "insight", "ledger", "lib", "ops", "people"},
    "insight": {"client", "console", "decisions", "feed", "lib", "people"},
    "keys": {"audit", "decisions", "feed", "ledger", "lib", "ops", "people"},
}


def imports_between_apps() -> dict[str, dict[str, list[str]]]:
    """{app: {imported app: [files]}} for every import of one app by another."""
    found: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for app in APPS:
        for path in (PACKAGE / app).rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names = [node.module]
                elif isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                else:
                    continue
                for name in names:
                    root, _, rest = name.partition(".")
                    other = rest.split(".")[0]
                    if root == "orbit_console" and other in APPS and other != app:
                        found[app][other].append(str(path.relative_to(PACKAGE)))
    return found


def test_every_app_has_its_place_in_the_layers() -> None:
    assert set(APPS) == set(ALLOWED)


def test_apps_import_only_the_layers_below_them() -> None:
    found = imports_between_apps()
    unexpected = {
        f"{app} -> {other} ({', '.join(sorted(set(files)))})"
        for app, others in found.items()
        for other, files in others.items()
        if other not in ALLOWED[app]
    }
    assert not unexpected


def test_the_allowed_layers_have_no_cycle() -> None:
    """No two apps import each other, directly or through others."""
    done: set[str] = set()

    def visit(app: str, path: tuple[str, ...]) -> None:
        assert app not in path, " -> ".join((*path, app))
        if app not in done:
            for other in ALLOWED[app]:
                visit(other, (*path, app))
            done.add(app)

    for app in ALLOWED:
        visit(app, ())


# Module circles inside an app that predate this check, each its owner's to break.
KNOWN_MODULE_CIRCLES = [{"decisions.followups", "decisions.submissions"}]


def module_imports() -> dict[str, set[str]]:
    """{module: modules of the package it imports}, names relative to the package
    (``notifications.worker``), deferred imports inside functions included."""
    modules = {
        ".".join(path.relative_to(PACKAGE).with_suffix("").parts).removesuffix(".__init__"): path
        for path in PACKAGE.rglob("*.py")
    }
    found: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                inner = target.removeprefix("orbit_console.")
                if target.startswith("orbit_console.") and inner in modules and inner != name:
                    found[name].add(inner)
    return found


def test_no_module_imports_itself_through_others() -> None:
    """Inside an app too, imports make no circle: a deferred import that closes one (the
    notifications' worker and the deliverers, issue 41) hides an order the code depends on."""
    graph = module_imports()
    circles: list[set[str]] = []
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circles.append(set(path[path.index(module) :]))
            return
        if module in done:
            return
        for other in sorted(graph[module]):
            visit(other, [*path, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])
    assert [c for c in circles if c not in KNOWN_MODULE_CIRCLES] == []


def test_the_checker_sees_imports_inside_functions() -> None:
    """The console's administrative commands import the ledger only inside functions."""
    assert "ledger" in imports_between_apps()["console"]
