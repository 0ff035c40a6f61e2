"""Layers: every import in shared/ and services/ runs sideways or down, never up, and shared's packages form no cycle.

The order, lowest first, and why each package sits where it does:

0. `engram_client`: the wire contract and errors, installed on its own; it imports nothing of the server.
1. `shared.errors`, `shared.settings`: what every other package may name.
2. `shared.runtime` (metrics, logs, health, HTTP), `shared.tracing`, `shared.text`: cross-cutting, no domain; and
   `shared.tenancy` (the registry, the NATS accounts, quotas and rates) and `shared.tls` (certificates), which
   every request and every stream is checked against, so they sit below messaging, which enforces them.
3. `shared.messaging`, `shared.store`, `shared.embedding`, `shared.llm`: one outside system each. They sit on one
   layer because the store takes its API key and CA from messaging's security module (one place for every secret)
   and the sparse encoder produces the store's vector type; the cycle check keeps those sideways imports one way.
4. `shared.compress`, `shared.working_memory`: built on one of those systems each (the LLM; NATS key-value); and
   `shared.evidence` (whether a window states a figure or a date, whether a later one states a thing again), which
   reads dates as the compressor writes them and which consolidation's marks and retrieval's currency share.
5. `shared.consolidation`: jobs over stored entries (supersede, merge, forget); forget also empties working memory.
6. `shared.ingest`, `shared.retrieval`: the two paths. Ingest supersedes a slot the moment it writes a fact, and
   retrieval judges currency with consolidation's gap after which newer evidence outdates a fact (MIN_GAP), so
   both sit above consolidation.
7. `shared.rebuild`, `shared.evaluation`: use cases that drive ingest, retrieval and consolidation together.
8. `services.*`: transport and composition, which may import anything in shared/ and nothing in shared/ imports.

Every import counts, wherever it is written (a function-local import is still a dependency).
"""
import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

LAYERS: dict[str, int] = {
    "engram_client": 0,
    "shared.errors": 1, "shared.settings": 1,
    "shared.runtime": 2, "shared.tracing": 2, "shared.text": 2, "shared.tenancy": 2, "shared.tls": 2,
    "shared.messaging": 3, "shared.store": 3, "shared.embedding": 3, "shared.llm": 3,
    "shared.compress": 4, "shared.working_memory": 4, "shared.evidence": 4,
    "shared.consolidation": 5,
    "shared.ingest": 6, "shared.retrieval": 6,
    "shared.rebuild": 7, "shared.evaluation": 7, "shared.transfer": 7,
    "services": 8,
}


def module_name(path: Path) -> str:
    """The dotted name of a source file under ROOT (`shared/ingest/accept.py` is `shared.ingest.accept`)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of everything the file imports, relative imports resolved (`from shared import x` names
    `shared.x`, which may be a module or a name in shared/__init__.py)."""
    package = module_name(path).split(".") if path.name == "__init__.py" else module_name(path).split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], base]).strip(".")
            yield from ((node.lineno, f"{base}.{alias.name}") for alias in node.names)


def unit(name: str) -> str | None:
    """The layered unit a dotted name belongs to (`shared.ingest.closer` → `shared.ingest`), None if outside."""
    top = name.split(".")
    if top[0] in ("engram_client", "services"):
        return top[0]
    if top[0] == "shared" and len(top) > 1:
        return ".".join(top[:2])
    return None


def sources() -> list[Path]:
    """Every Python file of shared/ and services/."""
    return sorted(p for folder in ("shared", "services") for p in (ROOT / folder).rglob("*.py"))


def edges() -> list[tuple[str, int, str, str, str]]:
    """(file, line, imported name, its unit, the importer's unit) for each import between two different units."""
    out = []
    for path in sources():
        here = unit(module_name(path))
        for line, name in imported(path):
            there = unit(name)
            if here is not None and there is not None and there != here:
                out.append((str(path.relative_to(ROOT)), line, name, there, here))
    return out


def upward() -> list[str]:
    """Each import that runs from a lower layer to a higher one, as `file:line imports name (layer a -> b)`."""
    return [f"{file}:{line} imports {name} (layer {LAYERS[here]} -> {LAYERS[there]})"
            for file, line, name, there, here in edges() if LAYERS[there] > LAYERS[here]]


def cycles() -> list[list[str]]:
    """The strongly connected groups of more than one package among shared's packages (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for _, _, _, there, here in edges():
        if here.startswith("shared.") and there.startswith("shared."):
            graph.setdefault(here, set()).add(there)
            graph.setdefault(there, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_package_has_a_layer() -> None:
    """Each package of shared/ (and services/) is placed in the order, so a new one must say where it stands."""
    units = {unit(module_name(p)) for p in sources()} - {None, "shared"}
    assert units <= set(LAYERS), f"no layer for {sorted(units - set(LAYERS))}"


def test_shared_never_imports_services() -> None:
    """No module of shared/ imports services/, where the composition roots live."""
    wrong = [f"{file}:{line} imports {name}" for file, line, name, there, here in edges()
             if there == "services" and here.startswith("shared")]
    assert wrong == []


def test_no_import_runs_up_the_layers() -> None:
    """Every import between packages goes to a package on the same layer or a lower one."""
    assert upward() == []


def test_shared_packages_import_each_other_without_cycles() -> None:
    """No two packages of shared/ depend on each other, directly or round a loop (ingest, consolidation and
    working memory in particular)."""
    assert cycles() == []
