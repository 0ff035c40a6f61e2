"""The suite's own rules (STYLE.md, Tests), read from the test sources with `ast`: helpers live in tests/support,
conftest files hold fixtures and pytest hooks only, every test says in a docstring what it proves, and no test
asserts on elapsed time."""
import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).parents[1]
MODULES = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)
TEST_MODULES = [p for p in MODULES if p.name.startswith("test_")]
CONFTESTS = [p for p in MODULES if p.name == "conftest.py"]
FIXTURE_DECORATORS = {"pytest.fixture", "pytest_asyncio.fixture", "fixture"}
# A name that holds a measured time: compared with `<` or `<=` in an assert, it makes the test a benchmark.
TIMED = re.compile(r"elapsed|took|duration|latenc|wall_?(clock|time)", re.IGNORECASE)


def _parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _where(path: Path, node: ast.AST) -> str:
    shown = path.relative_to(TESTS.parent) if path.is_relative_to(TESTS.parent) else path
    return f"{shown}:{getattr(node, 'lineno', 0)}"


def _forbidden(module: str) -> bool:
    """Whether a dotted module name (relative to tests/ or absolute) is a conftest or a test module."""
    return any(part == "conftest" or part.startswith("test_") for part in module.split(".") if part)


def forbidden_imports(path: Path) -> Iterator[str]:
    """Imports of a conftest module or of a test module (`from tests.e2e.conftest import x`,
    `from tests.unit import test_y`, `from .conftest import z`)."""
    for node in ast.walk(_parse(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 0 and not base.startswith("tests"):
                continue
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            if (name.startswith("tests") or isinstance(node, ast.ImportFrom)) and _forbidden(name):
                yield f"{_where(path, node)} imports {name}"
                break


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return ast.unparse(target)


def non_fixtures(path: Path) -> Iterator[str]:
    """Functions and classes at a conftest's top level that are neither fixtures nor pytest hooks (`pytest_*`)."""
    for node in _parse(path).body:
        if isinstance(node, ast.ClassDef):
            yield f"{_where(path, node)} class {node.name}"
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            fixture = any(_decorator_name(d) in FIXTURE_DECORATORS for d in node.decorator_list)
            if not fixture and not node.name.startswith("pytest_"):
                yield f"{_where(path, node)} def {node.name}"


def _tests(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            yield node
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            yield from (n for n in node.body
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name.startswith("test"))


def undocumented(path: Path) -> Iterator[str]:
    """Test functions without a docstring."""
    for node in _tests(_parse(path)):
        if not ast.get_docstring(node):
            yield f"{_where(path, node)} {node.name}"


def _timed(node: ast.expr) -> bool:
    """Whether an operand names a measured time (`elapsed`, `took[-1]`, `report.duration_s`, `r["latency"]`)."""
    while isinstance(node, ast.Subscript | ast.Call):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and TIMED.search(node.slice.value):
            return True
        node = node.value if isinstance(node, ast.Subscript) else node.func
    if isinstance(node, ast.BinOp):
        return _timed(node.left) or _timed(node.right)
    if isinstance(node, ast.Name):
        return bool(TIMED.search(node.id))
    if isinstance(node, ast.Attribute):
        return bool(TIMED.search(node.attr))
    return False


def timed_asserts(path: Path) -> Iterator[str]:
    """Asserts that bound a measured time from above (`elapsed < 3.0`, `2.0 > took`)."""
    for node in ast.walk(_parse(path)):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for op, left, right in zip(compare.ops, operands[:-1], operands[1:], strict=True):
                if (isinstance(op, ast.Lt | ast.LtE) and _timed(left)) or \
                        (isinstance(op, ast.Gt | ast.GtE) and _timed(right)):
                    yield f"{_where(path, node)} {ast.unparse(compare)}"


def _all(check: object, paths: list[Path]) -> list[str]:
    assert callable(check)
    return [found for path in paths for found in check(path)]


def test_the_rules_read_the_whole_suite() -> None:
    """The rules below see every test module and every conftest of tests/, this one included."""
    assert Path(__file__) in TEST_MODULES and TESTS / "conftest.py" in CONFTESTS
    assert {p.parent.name for p in TEST_MODULES} >= {"unit", "integration", "e2e"}


def test_no_module_imports_a_conftest_or_a_test_module() -> None:
    """Helpers live in tests/support: no module of tests/ imports from a conftest or from a test module."""
    found = _all(forbidden_imports, MODULES)
    assert not found, "move the helper to tests/support/<concern>.py:\n" + "\n".join(found)


def test_conftest_files_hold_fixtures_and_hooks_only() -> None:
    """Every function at a conftest's top level is a fixture or a `pytest_*` hook, and none defines a class."""
    found = _all(non_fixtures, CONFTESTS)
    assert not found, "move it to tests/support/<concern>.py:\n" + "\n".join(found)


def test_every_test_says_what_it_proves() -> None:
    """Every test function has a docstring."""
    found = _all(undocumented, TEST_MODULES)
    assert not found, f"{len(found)} tests without a docstring:\n" + "\n".join(found)


def test_no_test_asserts_on_elapsed_time() -> None:
    """No assert bounds a measured time (benchmarks measure time; a test checks what the reply says, under a
    generous guard such as asyncio.wait_for)."""
    found = _all(timed_asserts, TEST_MODULES)
    assert not found, "\n".join(found)


def test_the_rules_catch_what_they_forbid(tmp_path: Path) -> None:
    """Each rule finds a violation of its own in a module written to break it, and lets the allowed forms pass."""
    module = tmp_path / "test_broken.py"
    module.write_text(
        "from tests.e2e.conftest import eventually\n"
        "from tests.unit import test_other\n"
        "from .conftest import helper\n"
        "from tests.support.polling import eventually as fine\n"
        "import time\n\n"
        "def test_quiet():\n"
        "    started = time.perf_counter()\n"
        "    elapsed = time.perf_counter() - started\n"
        "    assert elapsed < 3.0\n"
        "    assert 2.0 > results['latency_ms']\n"
        "    assert elapsed >= 0 and reply.code == 'ok'\n\n"
        "def test_said():\n"
        "    '''It says.'''\n")
    conftest = tmp_path / "conftest.py"
    conftest.write_text(
        "import pytest\n\n"
        "def helper():\n    pass\n\n"
        "class Memory:\n    pass\n\n"
        "@pytest.fixture\ndef fixture_one():\n    pass\n\n"
        "@pytest.fixture(scope='module')\nasync def fixture_two():\n    pass\n\n"
        "def pytest_collection_modifyitems(config, items):\n    pass\n")
    assert [f.rsplit(" ", 1)[1] for f in forbidden_imports(module)] == [
        "tests.e2e.conftest", "tests.unit.test_other", "conftest"]
    assert [f.split(" ", 1)[1] for f in non_fixtures(conftest)] == ["def helper", "class Memory"]
    assert [f.rsplit(" ", 1)[1] for f in undocumented(module)] == ["test_quiet"]
    assert [f.split(" ", 1)[1] for f in timed_asserts(module)] == ["elapsed < 3.0", "2.0 > results['latency_ms']"]
