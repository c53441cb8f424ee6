"""The reference docs cover what the code defines, and say what the code does.

`docs/configuration.md` must have a row for every config key the code reads, in the section of
its kind (node `server.properties`, topic, producer, consumer, admin, Spark source and sink
options), and a documented default must equal the code's default wherever the code exposes one.
`docs/errors.md` must list every gRPC method of `proto/replog/pb/*.proto` and every wire error
code of `replog.errors` with its name and retriable flag, and must call every error the
producer treats as an unknown outcome indeterminate.
The docs live in the repo: nothing cites the team's notes outside it or their section signs,
every `docs/design/<note>.md#<heading>` citation, every link between docs and every benchmark
section cited in prose resolves, `docs/README.md` lists every doc, `docs/benchmarks.md` holds no
earlier runs (they are in `docs/benchmarks-history.md`), no comment tells how the code got there,
and no doc but that history names the helpers, branches or sessions that did the work.

Rules:
- Key sets, defaults, methods and codes are derived from the code here, never listed by hand:
  the config dataclasses and mappings are imported, and the modules that read `server.properties`
  are scanned (AST) for the keys they name and the defaults they pass, so a key added anywhere in
  `replog/server/` (or the log settings) without a doc row fails this test.
- Doc rows are Markdown table rows whose first cell holds the key(s) in backticks
  (`` | `a.b`, `c.d` | `default` | meaning | ``); the first backticked text of the second cell is
  the documented default. A row without one documents no default, which is only allowed where
  the code has none (a required key, or one derived from another setting).
- Documented defaults are compared by value (parsed the way the code parses that setting), so
  ``all`` may document acks=-1 and ``none`` compression codec 0.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from replog.client import config as client_config
from replog.client import sender
from replog.coordinator.group_migration import MIGRATION_POLICY_PROPERTY
from replog.errors import wire_error_classes
from replog.quorum.controller.config_definitions import BROKER_CONFIGS, TOPIC_CONFIGS
from replog.quorum.controller.controller_config import ControllerConfig
from replog.quorum.raft.config import PROPERTY_FIELDS, VOTERS_PROPERTY, RaftConfig
from replog.server.config import (
    group_coordinator_config,
    node_config,
    replica_manager_config,
    transaction_coordinator_config,
)
from replog.server.process.known_properties import KNOWN_NODE_PROPERTIES
from replog.spark import options as source_options
from replog.spark import sink_plan
from replog.storage import log_config, log_manager
from replog.storage.cleaner import cleaner_config
from replog.storage.log_manager import LogManagerConfig

ROOT = Path(__file__).resolve().parent.parent
CONFIGURATION = ROOT / "docs" / "configuration.md"
ERRORS = ROOT / "docs" / "errors.md"

# `## ` headings of docs/configuration.md, by kind of config.
SECTIONS = {
    "node": "Node configuration (server.properties)",
    "topic": "Topic configs",
    "producer": "Producer configs",
    "consumer": "Consumer configs",
    "admin": "Admin configs",
    "source": "Spark source options",
    "sink": "Spark sink options",
}
NO_DEFAULT = object()  # the code has a key but no default of its own for it
DOTTED_KEY = re.compile(r"^[a-z][a-z0-9]*(\.[a-z0-9]+)+$")


# --- reading the docs ----------------------------------------------------------------------------


def doc_sections(path: Path) -> dict[str, str]:
    text = path.read_text()
    sections: dict[str, str] = {}
    for chunk in re.split(r"^## ", text, flags=re.MULTILINE)[1:]:
        heading, _, body = chunk.partition("\n")
        sections[heading.strip()] = body
    return sections


def table_rows(text: str) -> Iterator[list[str]]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("|") and line.endswith("|") and not re.match(r"^\|[\s:|-]+\|$", line):
            yield [cell.strip() for cell in line[1:-1].split("|")]


def documented(kind: str) -> dict[str, str | None]:
    """Key -> documented default (None: the row names no default) of one section."""
    body = doc_sections(CONFIGURATION).get(SECTIONS[kind])
    assert body is not None, f"docs/configuration.md has no section '## {SECTIONS[kind]}'"
    rows: dict[str, str | None] = {}
    for cells in table_rows(body):
        keys = re.findall(r"`([^`]+)`", cells[0])
        if not keys or len(cells) < 3:
            continue
        default = re.search(r"`([^`]*)`", cells[1])
        for key in keys:
            assert key not in rows, f"{key} has two rows in '## {SECTIONS[kind]}'"
            rows[key] = default.group(1) if default else None
    return rows


# --- what the code defines -----------------------------------------------------------------------


def field_defaults(cls: type) -> dict[str, Any]:
    return {
        f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING
    }


def _module_constants(tree: ast.Module, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """Module globals plus every `name = "literal"` assignment in the module (local key names)."""
    names = dict(namespace)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
            and node.targets[0].id not in names
        ):
            names[node.targets[0].id] = node.value.value
    return names


def _evaluate(node: ast.expr, names: Mapping[str, Any]) -> Any:
    """A key or default expression (`"a.b"`, `KEY_NAME`, `str(DEFAULT)`) in its module's names;
    NO_DEFAULT when it needs more (a local variable, an attribute of the node's config)."""
    try:
        return eval(compile(ast.Expression(node), "<doc-test>", "eval"), {}, dict(names))
    except Exception:
        return NO_DEFAULT


# Hand-written sets of keys a module reads, joined by `known_properties` (not reads themselves).
KNOWN_KEY_LISTS = {"NODE_PROPERTIES", "BROKER_PROPERTIES"}


def scanned_node_keys() -> dict[str, Any]:
    """Keys named by the modules that read a node's server.properties, with the default each
    `properties.get(key, default)` or `positive_setting(properties, key, default)` passes."""
    paths = sorted((ROOT / "replog" / "server").rglob("*.py"))
    paths += [ROOT / "replog" / "storage" / "log_config.py"]
    paths += [ROOT / "replog" / "storage" / "log_manager.py"]
    found: dict[str, Any] = {}
    for path in paths:
        module_name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        tree = ast.parse(path.read_text())
        names = _module_constants(tree, vars(importlib.import_module(module_name)))
        # The unknown-key warning's own lists name keys without reading them: counting their
        # literals as reads would let a key listed there but read nowhere pass the test below.
        listed = {
            id(constant)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id in KNOWN_KEY_LISTS for t in node.targets)
            for constant in ast.walk(node.value)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and id(node) not in listed
                and isinstance(node.value, str)
                and DOTTED_KEY.match(node.value)
                and not node.value.startswith("replog.")
            ):
                found.setdefault(node.value, NO_DEFAULT)
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get" and len(node.args) == 2:
                receiver = ast.unparse(func.value)
                key_node, default_node = node.args
            elif isinstance(func, ast.Name) and func.id == "positive_setting":
                receiver, (_, key_node, default_node) = "properties", node.args
            else:
                continue
            key = _evaluate(key_node, names)
            if "propert" not in receiver or not isinstance(key, str):
                continue
            default = _evaluate(default_node, names)
            if default == "" or default is NO_DEFAULT:  # "" reads as unset
                found.setdefault(key, NO_DEFAULT)
            else:
                found[key] = default
    return found


def local_cluster_keys() -> set[str]:
    """The keys `replog cluster start` writes into each server.properties (`node_properties`
    and the port-naming ones it takes from `address_properties`)."""
    path = ROOT / "replog" / "cli" / "local_cluster.py"
    tree = ast.parse(path.read_text())
    writers = ("node_properties", "address_properties")
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in writers]
    assert len(functions) == len(writers)
    keys = set()
    for node in (inner for function in functions for inner in ast.walk(function)):
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys if isinstance(k, ast.Constant)}
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
    return {k for k in keys if isinstance(k, str)}


def node_code_defaults() -> dict[str, list[Any]]:
    """Every server.properties key -> the defaults the code gives it (one per reader)."""
    defaults: dict[str, list[Any]] = {}

    def add(key: str, value: Any) -> None:
        values = defaults.setdefault(key, [])
        if value is not NO_DEFAULT:
            values.append(value)

    for key, value in scanned_node_keys().items():
        add(key, value)
    for key in local_cluster_keys():
        add(key, NO_DEFAULT)
    add(VOTERS_PROPERTY, NO_DEFAULT)
    # Named by a constant of the groups' core (replog/coordinator), which the scan does not read.
    add(
        MIGRATION_POLICY_PROPERTY,
        field_defaults(group_coordinator_config.GroupCoordinatorConfig)[
            "group_consumer_migration_policy"
        ],
    )
    raft = field_defaults(RaftConfig)
    for key, field in PROPERTY_FIELDS.items():
        add(key, raft[field])
    controller = field_defaults(ControllerConfig)
    for key, (field, parse) in node_config.CONTROLLER_PROPERTIES.items():
        value = controller[field]
        add(key, value // 1000 if parse is node_config._seconds_as_ms else value)
    for key, definition in BROKER_CONFIGS.items():
        add(key, definition.parse(definition.default))
    for cls, names in (
        (replica_manager_config.ReplicaManagerConfig, replica_manager_config.PROPERTY_NAMES),
        (group_coordinator_config.GroupCoordinatorConfig, group_coordinator_config.PROPERTY_NAMES),
        (
            transaction_coordinator_config.TransactionCoordinatorConfig,
            transaction_coordinator_config.PROPERTY_NAMES,
        ),
        (LogManagerConfig, log_manager.PROPERTY_NAMES),
        (cleaner_config.CleanerConfig, cleaner_config.PROPERTY_NAMES),
    ):
        values = field_defaults(cls)
        for key, field in names.items():
            add(key, values[field])
    log_values = field_defaults(log_config.LogConfig)
    direct_parsers = {
        log_config._parse_int,
        log_config._parse_bool,
        log_config._parse_str,
        log_config._parse_double,
    }
    for key, (field, log_parse) in log_config.BY_DOTTED_NAME.items():
        direct = log_parse in direct_parsers
        add(key, log_values[field] if direct else NO_DEFAULT)  # hours/minutes: derived
    return defaults


def client_code_defaults(cls: type) -> dict[str, tuple[Any, Callable[[str, object], object]]]:
    """Dotted key -> (default, the parser of user values) of a client config dataclass."""
    return {
        f.name.replace("_", "."): (f.default, f.metadata["parse"])
        for f in dataclasses.fields(cls)
        if "parse" in f.metadata
    }


def source_code_defaults() -> dict[str, Any]:
    """Spark read options -> default (what a batch query with only the required options gets)."""
    parsed = source_options.parse_options(
        {"bootstrap.servers": "localhost:9092", "subscribe": "t"}, source_options.Mode.BATCH
    )
    known: dict[str, Any] = {name: NO_DEFAULT for name in source_options.KNOWN.values()}
    known["failOnDataLoss"] = parsed.fail_on_data_loss
    known["includeHeaders"] = parsed.include_headers
    known["pollTimeoutMs"] = parsed.poll_timeout_ms
    known["kafkaConsumer.pollTimeoutMs"] = parsed.poll_timeout_ms
    return known


# --- comparing a documented default with the code's ----------------------------------------------


def same_value(doc: str, code: Any) -> bool:
    text = doc.strip().replace("_", "") if isinstance(code, int) else doc.strip()
    if code is None:
        return text in ("None", "null")
    if isinstance(code, bool):
        return text.lower() == str(code).lower()
    if isinstance(code, float) and math.isinf(code):
        return text == "inf"
    if isinstance(code, int):
        return text.lstrip("-").isdigit() and int(text) == code
    if isinstance(code, tuple):
        return tuple(item.strip() for item in text.split(",") if item.strip()) == code
    return bool(text == str(code))


def check_rows(
    kind: str,
    code: Mapping[str, list[Any]],
    same: Callable[[str, str, Any], bool] = lambda key, doc, value: same_value(doc, value),
) -> list[str]:
    rows = documented(kind)
    problems = []
    for key in sorted(code):
        if key not in rows:
            problems.append(f"{key}: no row in '## {SECTIONS[kind]}'")
            continue
        doc = rows[key]
        for value in code[key]:
            if doc is None and value in ((), ""):  # "empty" needs no backticks
                continue
            if doc is None:
                problems.append(f"{key}: the code's default is {value!r}; the doc gives none")
            elif not same(key, doc, value):
                problems.append(f"{key}: documented default {doc!r}, the code's is {value!r}")
    return problems


# --- the configuration reference -----------------------------------------------------------------


def test_every_node_key_is_documented_with_the_codes_default() -> None:
    code = node_code_defaults()
    assert {"node.id", "replica.lag.time.max.ms", "log.segment.bytes", "listeners"} <= set(code)
    assert check_rows("node", code) == []


def test_node_section_names_no_key_the_code_does_not_read() -> None:
    stale = set(documented("node")) - set(node_code_defaults())
    assert stale == set(), f"documented but not read by the code: {sorted(stale)}"


def test_the_unknown_key_warning_knows_exactly_the_keys_the_node_reads() -> None:
    # A key read somewhere but missing from the known set would be warned about as unknown
    # while it works; one known but read nowhere would hide a typo's warning.
    assert set(node_code_defaults()) == KNOWN_NODE_PROPERTIES


def test_every_topic_config_is_documented_with_the_controllers_default() -> None:
    code = {key: [d.parse(d.default)] for key, d in TOPIC_CONFIGS.items()}

    def same(key: str, doc: str, value: Any) -> bool:
        return bool(TOPIC_CONFIGS[key].parse(doc) == value)

    assert check_rows("topic", code, same) == []
    assert set(documented("topic")) == set(code)


@pytest.mark.parametrize(
    ("kind", "cls"),
    [
        ("producer", client_config.ProducerConfig),
        ("consumer", client_config.ConsumerConfig),
        ("admin", client_config.AdminConfig),
    ],
)
def test_every_client_config_is_documented_with_its_default(kind: str, cls: type) -> None:
    code = client_code_defaults(cls)

    def same(key: str, doc: str, value: Any) -> bool:
        if doc in ("None", "null") or value is None:
            return doc in ("None", "null") and value is None
        return bool(code[key][1](key, doc) == value)

    assert check_rows(kind, {k: [v] for k, (v, _) in code.items()}, same) == []
    assert set(documented(kind)) == set(code)


def test_every_spark_read_option_is_documented() -> None:
    code = source_code_defaults()
    rows = {k: v for k, v in documented("source").items() if "<" not in k}
    problems = check_rows("source", {k: [] if v is NO_DEFAULT else [v] for k, v in code.items()})
    assert problems == []
    assert set(rows) == set(code)


def test_every_spark_write_option_and_producer_default_is_documented() -> None:
    code: dict[str, list[Any]] = {name: [] for name in sink_plan.KNOWN.values()}
    for key, value in sink_plan.SINK_PRODUCER_DEFAULTS.items():
        code[f"kafka.{key}"] = [value]
    assert check_rows("sink", code) == []
    rows = {k for k in documented("sink") if "<" not in k}
    assert rows == set(code)


def test_the_doc_check_can_fail() -> None:
    """The comparisons above are not vacuous: a wrong default or a missing key is caught."""
    assert not same_value("30000", 3000)
    assert not same_value("true", False)
    assert same_value("1_048_576", 1048576)
    assert same_value("localhost:9092", ("localhost:9092",))
    missing = check_rows("node", {"no.such.key": [1]})
    assert missing == ["no.such.key: no row in '## Node configuration (server.properties)'"]
    wrong = check_rows("node", {"replica.lag.time.max.ms": [1234]})
    assert wrong and "documented default" in wrong[0]


# --- the protocol and error-code reference -------------------------------------------------------


def proto_methods() -> set[tuple[str, str]]:
    methods = set()
    for path in sorted((ROOT / "proto" / "replog" / "pb").glob("*.proto")):
        text = re.sub(r"//[^\n]*", "", path.read_text())
        for service, body in re.findall(r"service\s+(\w+)\s*\{(.*?)\n\}", text, re.DOTALL):
            methods |= {(service, rpc) for rpc in re.findall(r"rpc\s+(\w+)\s*\(", body)}
    return methods


def documented_methods() -> set[tuple[str, str]]:
    body = doc_sections(ERRORS)["gRPC services and methods"]
    found = set()
    for cells in table_rows(body):
        service = re.fullmatch(r"`(\w+)`", cells[0])
        if service:
            found |= {(service.group(1), m) for m in re.findall(r"`(\w+)`", cells[2])}
    return found


def documented_codes() -> dict[int, list[str]]:
    body = doc_sections(ERRORS)["Error codes"]
    codes: dict[int, list[str]] = {}
    for cells in table_rows(body):
        if re.fullmatch(r"-?\d+", cells[0]):
            assert int(cells[0]) not in codes, f"code {cells[0]} has two rows"
            codes[int(cells[0])] = cells
    return codes


def test_every_grpc_method_is_in_the_services_table() -> None:
    methods = proto_methods()
    assert ("ReplicaFetch", "Fetch") in methods and ("RaftQuorum", "Vote") in methods
    missing = methods - documented_methods()
    assert missing == set(), f"not in docs/errors.md: {sorted(missing)}"


def test_every_error_code_is_in_the_table_with_its_name_and_retriable_flag() -> None:
    codes = documented_codes()
    classes = wire_error_classes()
    assert set(codes) == set(classes)
    for code, cls in classes.items():
        cells = codes[code]
        assert cells[1] == f"`{cls.error_name}`", (code, cells[1])
        assert cells[2] == ("yes" if cls.retriable else "no"), (code, cells[2])
        assert cells[3] in ("definite", "indeterminate", "-"), (code, cells[3])


def test_errors_the_producer_treats_as_unknown_outcomes_are_documented_indeterminate() -> None:
    codes = documented_codes()
    unknown = [cls.code for cls in sender._UNKNOWN_OUTCOME]
    assert unknown, "the producer names no unknown-outcome error"
    for code in unknown:
        assert codes[code][3] == "indeterminate", (code, codes[code][3])
    # A refusal before the append is definite: nothing was written.
    for name in ("NOT_ENOUGH_REPLICAS", "INVALID_REQUIRED_ACKS", "CORRUPT_MESSAGE"):
        (cells,) = [c for c in codes.values() if c[1] == f"`{name}`"]
        assert cells[3] == "definite", name


# --- the docs live in the repo -------------------------------------------------------------------
# A clone has nothing beside the repository: citations name files in it (docs/design/*.md and a
# heading anchor), never the team's notes outside it, nor their section numbers.

SKIPPED_DIRS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    ".mypy_cache",
    ".ruff_cache",
    ".pytest_cache",
    ".hypothesis",
}
# Built from parts, so that this file does not hold what it looks for.
OUTSIDE_CITATIONS = ("/".join(("..", "shared")), "\N{SECTION SIGN}")
DOCS = ROOT / "docs"
DESIGN_CITATION = re.compile(r"docs/design/([\w-]+)\.md((?:#[\w-]+)?(?:, #[\w-]+)*)")
DOC_LINK = re.compile(r"\]\(([\w/.-]+\.md)(?:#([\w-]+))?\)")


def repo_text_files() -> Iterator[tuple[Path, str]]:
    for directory, subdirs, files in os.walk(ROOT):
        subdirs[:] = [d for d in subdirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info")]
        for name in files:
            path = Path(directory, name)
            data = path.read_bytes()
            if b"\0" in data:
                continue
            try:
                yield path, data.decode("utf-8")
            except UnicodeDecodeError:
                continue


def heading_anchors(path: Path) -> set[str]:
    """The anchors GitHub gives a Markdown file's headings."""
    anchors = set()
    for line in path.read_text().splitlines():
        heading = re.match(r"#+ (.+)", line)
        if heading:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            anchors.add(text.replace(" ", "-"))
    return anchors


def test_no_file_cites_what_a_clone_does_not_have() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path, text in repo_text_files()
        for number, line in enumerate(text.splitlines(), 1)
        if any(citation in line for citation in OUTSIDE_CITATIONS)
    ]
    assert found == [], "cite docs/design/*.md headings instead:\n" + "\n".join(found)


def test_every_design_note_citation_names_an_existing_heading() -> None:
    anchors = {path.stem: heading_anchors(path) for path in (DOCS / "design").glob("*.md")}
    broken = []
    cited = 0
    for path, text in repo_text_files():
        for match in DESIGN_CITATION.finditer(text):
            note, tail = match.group(1), match.group(2)
            cited += 1
            if note not in anchors:
                broken.append(f"{path.relative_to(ROOT)}: docs/design/{note}.md does not exist")
                continue
            for anchor in re.findall(r"#([\w-]+)", tail):
                if anchor not in anchors[note]:
                    broken.append(f"{path.relative_to(ROOT)}: docs/design/{note}.md#{anchor}")
    assert cited > 100  # the code cites the notes; a broken pattern must not pass vacuously
    assert broken == []


def test_every_link_between_docs_resolves() -> None:
    broken = []
    for path in DOCS.rglob("*.md"):
        for target, anchor in DOC_LINK.findall(path.read_text()):
            linked = (path.parent / target).resolve()
            if not linked.is_file():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and anchor not in heading_anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target}#{anchor}")
    assert broken == []


def test_the_docs_index_lists_every_doc() -> None:
    index = (DOCS / "README.md").read_text()
    listed = {target for target, _ in DOC_LINK.findall(index)}
    docs = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md") if path.name != "README.md"}
    assert docs - listed == set(), "docs/README.md lacks a line for these"
    assert listed - docs == set(), "docs/README.md lists docs that do not exist"


def test_benchmarks_show_current_figures_and_the_history_keeps_the_rest() -> None:
    current = (DOCS / "benchmarks.md").read_text()
    assert not re.search(r"^### Earlier", current, flags=re.MULTILINE)
    assert len(current.splitlines()) < 800, "benchmarks.md is the current report: keep it short"
    history = (DOCS / "benchmarks-history.md").read_text()
    assert re.search(r"^### Earlier", history, flags=re.MULTILINE)


# --- the docs read as a report -------------------------------------------------------------------
# Docs say what is and what was measured, never who did what when: the tags of the helpers and
# branches that did the work ("h50x", "h56p", "hpcd", "lead-iter"), the sessions that did it
# ("the third session", "this session") and the journal's headings go to commit messages; only
# the benchmark history keeps how the figures moved.

JOURNAL_MARKS = re.compile(
    r"\bh[0-9]{2}[a-z]{1,3}[0-9]?\b"  # a helper's tag or branch: h50x, h55a, h52rc, h50r2
    r"|\br[0-9]{2}[a-z]{1,3}\b"  # a reviewer's tag: r55a
    r"|\bhpcd\b|\blead-(?:iter|slice|pace|ag[0-9]?)\b"  # the other tags and branches used
    r"|\b(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth) session\b"
    r"|\bthis session\b|\bLead, 20[0-9]{2}\b|\btried, not landed\b",
    re.IGNORECASE,
)


def journal_marks(text: str) -> list[str]:
    return [
        f"{number}: {match.group(0)!r} in {line.strip()[:100]}"
        for number, line in enumerate(text.splitlines(), 1)
        for match in JOURNAL_MARKS.finditer(line)
    ]


def test_docs_carry_no_helper_or_session_tags() -> None:
    pages = [path for path in DOCS.glob("*.md") if path.name != "benchmarks-history.md"]
    found = [
        f"{path.relative_to(ROOT)}:{mark}"
        for path in [*pages, ROOT / "README.md"]
        for mark in journal_marks(path.read_text())
    ]
    assert found == [], "say what is, not who did it when:\n" + "\n".join(found)


def test_the_tag_check_can_fail() -> None:
    journal = (
        "### Lead, 2026-11-28 (fifth session): bulk threads (h50x, h52rc, h50r2), `hpcd` and "
        "`lead-iter`, review r55a (tried, not landed). This session took the loop."
    )
    assert len(journal_marks(journal)) == 10
    report = (
        "Each fetch session's epoch; a SparkSession; commit `a986829`, h264 video, 100 ms "
        "p99s, the session timeout; `ch50x` and `h50` are not tags."
    )
    assert journal_marks(report) == []


# A citation of a benchmark section in prose: `docs/benchmarks.md, "Heading"` (also with the
# path in backticks, the heading in parentheses, no comma, or over a comment's two lines).
BENCHMARK_CITATION = re.compile(
    r"benchmarks(-history)?\.md`?,?[\s#]*\(?\"([^\"]{1,200})\"", re.MULTILINE
)


def test_every_benchmark_section_cited_in_prose_exists() -> None:
    headings = {
        name: [
            re.sub(r"\s+", " ", match)
            for match in re.findall(r"^#+ (.+)$", (DOCS / name).read_text(), re.MULTILINE)
        ]
        for name in ("benchmarks.md", "benchmarks-history.md")
    }
    broken = []
    cited = 0
    for path, text in repo_text_files():
        if path.name == "test_docs.py":
            continue
        for match in BENCHMARK_CITATION.finditer(text):
            cited += 1
            page = "benchmarks-history.md" if match.group(1) else "benchmarks.md"
            title = re.sub(r"\s+#?\s*", " ", match.group(2)).strip()  # a comment's lines
            if not any(heading.startswith(title) for heading in headings[page]):
                broken.append(f"{path.relative_to(ROOT)}: {page}, {title!r}")
    assert cited > 20  # the code cites the sections; a broken pattern must not pass vacuously
    assert broken == [], "no such heading:\n" + "\n".join(broken)


def test_comments_say_why_not_how_the_code_got_there() -> None:
    marker = re.compile(r"Fix \((found|issue)|[Ff]ound in review")
    found = [
        f"{path.relative_to(ROOT)}:{number}"
        for path, text in repo_text_files()
        if path.suffix in (".py", ".proto")
        for number, line in enumerate(text.splitlines(), 1)
        if marker.search(line)
    ]
    assert found == [], "history goes to commit messages"
