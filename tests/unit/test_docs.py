"""The documentation stays true to the code: the generated configuration page, the README's size and code map."""
import re
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from services.docs import configuration
from shared.evaluation.settings import EvalSettings
from shared.settings import Settings

ROOT = Path(__file__).parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def _code_map_paths() -> list[str]:
    """Every path the README's code map names: top-level entries, and the entries indented under them."""
    section = README.read_text(encoding="utf-8").split("## Code map", 1)[1]
    block = section.split("```", 2)[1]
    paths, parent = [], ""
    for line in block.splitlines()[1:]:
        found = re.match(r"^( *)(\S+)", line)
        if not found or len(found[1]) > 4:  # blank, or the continuation of a description
            continue
        name = found[2]
        if not found[1]:
            parent = name if name.endswith("/") else ""
            paths.append(name)
        else:
            paths.append(parent + name)
    return paths


class _Sample(BaseSettings):
    """Settings shaped as shared/settings.py writes them, for the generator."""

    model_config = SettingsConfigDict(env_prefix="SAMPLE_")

    # Where things run
    data_dir: str = "data"
    port: int = Field(default=4222, ge=0, le=65535)  # 0 picks a free one
    # Replicas of every stream;
    # None: what the server allows.
    replicas: int | None = None

    # LLM (any endpoint); without a URL everything stays offline
    mode: Literal["a", "b"] = Field(default="a", description="what Field(description=) says wins")


def test_the_generator_reads_sections_comments_types_and_defaults() -> None:
    """A comment after a blank line opens a section; a field's description is its comments or its Field's."""
    found = {row.variable: row for row in configuration.rows(_Sample)}
    assert [row.section for row in found.values()] == ["Where things run"] * 3 + [
        "LLM (any endpoint); without a URL everything stays offline"]
    assert found["`SAMPLE_DATA_DIR`"].description == "" and found["`SAMPLE_DATA_DIR`"].default == "`data`"
    assert found["`SAMPLE_PORT`"].kind == "`int`, 0 ≤ x ≤ 65535" and found["`SAMPLE_PORT`"].default == "`4222`"
    assert found["`SAMPLE_PORT`"].description == "0 picks a free one"
    assert found["`SAMPLE_REPLICAS`"].description == "Replicas of every stream; None: what the server allows."
    assert found["`SAMPLE_REPLICAS`"].kind == "`int`" and found["`SAMPLE_REPLICAS`"].default == "unset"
    assert found["`SAMPLE_MODE`"].kind == "one of `a`, `b`"
    assert found["`SAMPLE_MODE`"].description == "what Field(description=) says wins"


def test_the_configuration_page_matches_the_settings() -> None:
    """docs/configuration.md holds what `engram docs config` writes from Settings now (run it after a change)."""
    assert not configuration.is_stale(DOCS / "configuration.md"), "run `engram docs config`: the page is stale"


def test_every_setting_has_a_row_on_the_configuration_page() -> None:
    """Each field of Settings and EvalSettings appears as its ENGRAM_ variable on the configuration page."""
    page = (DOCS / "configuration.md").read_text(encoding="utf-8")
    names = [*Settings.model_fields, *EvalSettings.model_fields]
    assert [name for name in names if f"`ENGRAM_{name.upper()}`" not in page] == []


def test_every_variable_the_docs_name_is_a_setting() -> None:
    """No page names an ENGRAM_ variable that does not exist (a renamed or removed setting left behind)."""
    known = {f"ENGRAM_{name.upper()}" for name in [*Settings.model_fields, *EvalSettings.model_fields]}
    pages = [README, *DOCS.rglob("*.md")]
    unknown = set()
    for page in pages:
        for name in re.findall(r"\bENGRAM_[A-Z0-9_]+", page.read_text(encoding="utf-8")):
            if name not in known and not (name.endswith("_") and any(k.startswith(name) for k in known)):
                unknown.add(f"{page.relative_to(ROOT)}: {name}")
    assert sorted(unknown) == []


def test_the_readme_is_read_in_five_minutes() -> None:
    """The README stays under 250 lines; the rest belongs in docs/."""
    lines = len(README.read_text(encoding="utf-8").splitlines())
    assert lines < 250, f"README.md has {lines} lines; move detail into a page under docs/"


def test_every_path_in_the_readmes_code_map_exists() -> None:
    """A folder or file the code map names is where it says (update the map when code moves)."""
    paths = _code_map_paths()
    assert len(paths) > 20 and "shared/settings.py" in paths and "services/ingestor/" in paths
    assert [path for path in paths if not (ROOT / path).exists()] == []


def test_every_repository_path_the_docs_name_exists() -> None:
    """A file or folder a page names in backticks (`tests/e2e/test_crash.py`, `bench/soak*.py`) is in the tree, and a
    test it names (`tests/e2e/test_crash.py::test_name`) is in that file."""
    named = r"`((?:bench|clients|contract|deploy|docs|services|shared|tests)/[^`\s]*)`"
    missing = set()
    for page in [README, *DOCS.rglob("*.md")]:
        for path in re.findall(named, page.read_text(encoding="utf-8")):
            where, _, name = path.partition("::")
            found = list(ROOT.glob(where.rstrip("/")))
            if not found or (name and not any(f"def {name}(" in f.read_text(encoding="utf-8") for f in found)):
                missing.add(f"{page.relative_to(ROOT)}: {path}")
    assert sorted(missing) == []


def test_the_readme_links_to_pages_that_exist() -> None:
    """Each docs/ link in the README reaches a page (mkdocs checks the links between pages)."""
    links = re.findall(r"\]\((docs/[^)#]+)", README.read_text(encoding="utf-8"))
    assert links and [link for link in links if not (ROOT / link).exists()] == []
