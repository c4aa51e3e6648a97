"""The package layout STYLE.md and the README's "Where things live" ask for: modules import
downward, never in a circle; the engines (`caesar.memory.engine`) sit beneath recall
(`caesar.memory.recall`), which sits beneath the concepts that use it; nothing outside the
engine package and db/ asks which database it runs on or writes SQL as text; the person is
handed as a `Scope`.

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
ENGINE = "caesar.memory.engine"
RECALL = "caesar.memory.recall"
# What sits above recall (and so above the engines): the concepts that use them.
ABOVE_RECALL = (
    "caesar.memory.facts",
    "caesar.memory.episodes",
    "caesar.memory.context",
    "caesar.memory.standing",
    "caesar.memory.forget",
    "caesar.brain",
    "caesar.services",
    "caesar.api",
    "caesar.cli",
)
ROOT = SRC.parent


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


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _upward(graph: dict[str, set[str]], package: str, above: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{module} -> {target}"
        for module in graph
        if _under(module, package)
        for target in graph[module]
        if any(_under(target, top) for top in above)
    )


def test_the_engines_import_nothing_above_them() -> None:
    graph = import_graph()
    assert sum(_under(m, ENGINE) for m in graph) > 5, f"no modules under {ENGINE}"
    upward = _upward(graph, ENGINE, (RECALL, *ABOVE_RECALL))
    assert not upward, "an engine imports what sits above it: " + "; ".join(upward)


def test_recall_imports_nothing_above_it() -> None:
    graph = import_graph()
    assert f"{RECALL}.pipeline" in graph, "recall has no pipeline"
    upward = _upward(graph, RECALL, ABOVE_RECALL)
    assert not upward, "recall imports a concept above it: " + "; ".join(upward)


# Recall's parts that other packages may use: its entry (pipeline), what it hands back (hits),
# its per-process state (episodes), what a message says (question, when) and the small
# model's block (plain). Ranking, fusion, keywords and excerpts are recall's own.
RECALL_PUBLIC = ("pipeline", "hits", "episodes", "question", "when", "plain")


def test_recall_has_one_way_in() -> None:
    graph = import_graph()
    reached = sorted(
        f"{module} -> {target}"
        for module in graph
        if not _under(module, RECALL)
        for target in graph[module]
        if _under(target, RECALL)
        and target != RECALL
        and target.removeprefix(RECALL + ".").split(".")[0] not in RECALL_PUBLIC
    )
    assert not reached, "recall's insides used from outside it: " + "; ".join(reached)
    pipeline = ast.parse((SRC / "caesar/memory/recall/pipeline.py").read_text(encoding="utf-8"))
    entries = {n.name for n in pipeline.body if isinstance(n, ast.FunctionDef)}
    assert {"recall", "preview"} <= entries


# -- the engine behind one door ----------------------------------------------------------------
_DIALECT = re.compile(r"\bis_sqlite\b|\.dialect\b|get_backend_name|paramstyle")
_SQL_HOMES = ("caesar.db", ENGINE)


def _outside_engine() -> dict[str, Path]:
    return {m: p for m, p in _modules().items() if not any(_under(m, h) for h in _SQL_HOMES)}


def test_no_dialect_check_outside_the_engine_package_and_db() -> None:
    found = sorted(
        f"{module}:{i}: {line.strip()}"
        for module, path in _outside_engine().items()
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _DIALECT.search(line)
    )
    assert not found, "a dialect check outside memory/engine and db/:\n" + "\n".join(found)


def sql_as_text(path: Path) -> list[str]:
    """SQL written as text: a string of SQL, `text()`, `exec_driver_sql`, the driver's rows."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = [
        f"imports {name}"
        for name in _imported_names(tree)
        if name in ("sqlalchemy.text", "caesar.memory.engine.sql.driver_rows")
    ]
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
    }
    for node in ast.walk(tree):
        if id(node) in docs:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in ("exec_driver_sql", "driver_rows"):
                found.append(f"line {node.lineno}: calls .{node.func.attr}()")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _SQL_TEXT.search(node.value):
                found.append(f"line {node.lineno}: SQL text {node.value[:40]!r}")
    return found


def test_sql_text_is_written_in_the_engine_package_and_db_only() -> None:
    """Elsewhere a store queries through SQLAlchemy expressions on the models, the person's
    `Scope` in hand: the README's "where may I write SQL"."""
    found = sorted(
        f"{module}: {what}"
        for module, path in _outside_engine().items()
        for what in sql_as_text(path)
    )
    assert not found, "SQL as text outside memory/engine and db/:\n" + "\n".join(found)


# -- the person as a scope ---------------------------------------------------------------------
MAX_BARE_PERSON = 30


def bare_person_signatures() -> list[str]:
    """Functions that take a bare `person`/`person_id` rather than a `Scope` (memory/scope.py)."""
    found = []
    for module, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args.posonlyargs + node.args.args + node.args.kwonlyargs
                if any(a.arg in ("person", "person_id") for a in args):
                    found.append(f"{module}.{node.name}")
    return found


def test_the_person_is_handed_as_a_scope() -> None:
    bare = bare_person_signatures()
    assert len(bare) <= MAX_BARE_PERSON, f"{len(bare)} take a bare person:\n" + "\n".join(bare)


# -- the README's answer ------------------------------------------------------------------------
def test_the_readme_says_where_recall_lives_and_where_sql_may_be_written() -> None:
    """One line a newcomer finds, naming the homes these tests hold the code to."""
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    [answer] = [line for line in lines if line.startswith("**Where recall lives")]
    for home in ("src/caesar/memory/recall/", "src/caesar/memory/engine/", "src/caesar/db/"):
        assert f"`{home}`" in answer and (ROOT / home).is_dir()
    assert "`pipeline.recall`" in answer


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
