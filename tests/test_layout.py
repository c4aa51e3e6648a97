"""The package layout STYLE.md asks for: modules import downward, never in a circle, and the
search machinery (`caesar.memory.search`) sits beneath the concepts that use it.

Read from the source with `ast`, so lazy imports inside functions count as much as those at
the top of a module — Python tolerates a circle of lazy imports, a reader does not. Imports
under `if TYPE_CHECKING:` are left out: they never run.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "caesar"
SEARCH = "caesar.memory.search"
ABOVE_SEARCH = ("caesar.memory.facts", "caesar.memory.episodes", "caesar.memory.context")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((SRC / PACKAGE).rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def _import_nodes(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run, at any depth, skipping `if TYPE_CHECKING:` bodies."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
            continue
        pending.extend(ast.iter_child_nodes(node))
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of a dotted name that is one of our modules."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _targets(module: str, modules: dict[str, Path]) -> set[str]:
    path = modules[module]
    is_package = path.name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    targets: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            if node.level:
                # Relative: level 1 is this module's package (the module itself for __init__).
                anchor = module.split(".")
                drop = node.level - 1 if is_package else node.level
                anchor = anchor[: len(anchor) - drop]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from caesar.memory.search import passages` imports caesar.memory.passages.
            names = [
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            ]
        for name in names:
            target = _known(name, modules)
            if target is not None and target != module:
                targets.add(target)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {module: _targets(module, modules) for module in modules}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle as [a, b, …, a], or None. Depth-first, white/grey/black."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state:
                cycle = visit(nxt)
                if cycle is not None:
                    return cycle
        state[node] = 2
        path.pop()
        return None

    for start in sorted(graph):
        if start not in state:
            cycle = visit(start)
            if cycle is not None:
                return cycle
    return None


def test_the_graph_sees_lazy_imports() -> None:
    # A guard on the reader itself: caesar.api.app imports its routers inside a function.
    graph = import_graph()
    assert "caesar.api.routes_chat" in graph["caesar.api.app"]


def test_find_cycle_reports_the_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycles() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_search_machinery_imports_nothing_above_it() -> None:
    graph = import_graph()
    search = [m for m in graph if m == SEARCH or m.startswith(SEARCH + ".")]
    assert len(search) > 1, f"no modules under {SEARCH}"
    upward = sorted(
        f"{module} -> {target}"
        for module in search
        for target in graph[module]
        if any(target == top or target.startswith(top + ".") for top in ABOVE_SEARCH)
    )
    assert not upward, "search imports a concept above it: " + "; ".join(upward)


# -- the edges reach the tables through the stores ---------------------------------------------
EDGES = ("caesar.api", "caesar.cli", "caesar.mcp_server")
# SQLAlchemy's exceptions are what a store raises; catching one is not reaching a table.
_EDGE_MAY_IMPORT = ("sqlalchemy.exc",)
# Calls that only a database session or connection answers, on whatever it is named ...
_SQL_CALLS = {"execute", "exec_driver_sql", "scalar", "scalars", "query", "raw_connection"}
# ... and the ORM's own verbs, on anything named like a session or connection.
_SESSION_CALLS = {"get", "add", "add_all", "delete", "merge", "flush", "refresh", "connect"}
_SQL_TEXT = re.compile(
    r"\b(?:SELECT\s[\s\S]*?\sFROM|INSERT\s+INTO|DELETE\s+FROM|UPDATE\s+\w+\s+SET|PRAGMA)\b"
)


def _is_edge(module: str) -> bool:
    return any(module == edge or module.startswith(edge + ".") for edge in EDGES)


def _imported_names(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif node.level == 0 and node.module:
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _is_session_like(node: ast.expr) -> bool:
    name = node.id if isinstance(node, ast.Name) else getattr(node, "attr", "")
    return name.endswith(("session", "connection", "engine"))


def table_access(path: Path) -> list[str]:
    """Where a module reaches the database itself: an import of the models or of SQLAlchemy
    (its exceptions aside), a session or connection call, a string of SQL. `if TYPE_CHECKING:`
    imports (annotations naming a row type) are allowed: they never run."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for name in _imported_names(tree):
        if name.startswith("caesar.db.models") or (
            (name == "sqlalchemy" or name.startswith("sqlalchemy."))
            and not name.startswith(_EDGE_MAY_IMPORT)
        ):
            found.append(f"imports {name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            verb, receiver = node.func.attr, node.func.value
            if verb in _SQL_CALLS or (verb in _SESSION_CALLS and _is_session_like(receiver)):
                found.append(f"line {node.lineno}: calls .{verb}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _SQL_TEXT.search(node.value):
                found.append(f"line {node.lineno}: SQL text {node.value[:40]!r}")
    return found


def test_the_edge_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    # A guard on the rule itself, on a module written the way the edges used to be.
    sample = tmp_path / "edge.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from sqlalchemy import select\n"
        "from sqlalchemy.exc import SQLAlchemyError\n"
        "if TYPE_CHECKING:\n"
        "    from caesar.db.models import Fact\n"
        "def f(session, services):\n"
        "    from caesar.db.models import AuditLog\n"
        "    session.get(AuditLog, 1)\n"
        "    services.db.engine.connect()\n"
        "    row = {}.get('a')\n"
        "    return session.execute('SELECT id FROM facts')\n"
    )
    assert set(table_access(sample)) == {
        "imports caesar.db.models.AuditLog",
        "imports sqlalchemy.select",
        "line 8: calls .get()",
        "line 9: calls .connect()",
        "line 11: calls .execute()",
        "line 11: SQL text 'SELECT id FROM facts'",
    }


def test_the_edges_touch_no_table() -> None:
    """The API, the dashboard, the CLI and the MCP server read and write memory through the
    stores (audit, conversations, facts, forget, …), never the tables: the one place a
    person's scope will be added (issue #23)."""
    edges = {m: p for m, p in _modules().items() if _is_edge(m)}
    assert "caesar.mcp_server" in edges and "caesar.api.dashboard_audit" in edges
    found = sorted(f"{m}: {what}" for m, p in edges.items() for what in table_access(p))
    assert not found, "an edge reaches the database itself:\n" + "\n".join(found)


def test_the_services_container_is_typed_wherever_it_is_handed() -> None:
    """`Services` is handed around as `caesar.container.Container` (or `Services` itself at
    the edges), never as `Any`: the type is what tells a reader what a worker may reach
    (issue #47). A parameter or attribute named services/built typed Any is refused."""
    untyped = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.arg in ("services", "built"):
                annotation = node.annotation
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Attribute):
                annotation = node.annotation if node.target.attr == "services" else None
            else:
                continue
            if isinstance(annotation, ast.Name) and annotation.id == "Any":
                untyped.append(f"{module}:{node.lineno}")
    assert not untyped, "the services container typed Any:\n" + "\n".join(untyped)
