"""Where the code starts asyncio tasks: the tests that hold the server and the clients to
starting theirs in their one TaskGroup (`node_tasks`, `task_owner`) list the exceptions."""

from __future__ import annotations

import ast
from pathlib import Path


def task_starts(path: Path) -> set[str]:
    """The functions (as Class.method) of `path` that call create_task or ensure_future."""
    found: set[str] = set()

    def visit(node: ast.AST, scope: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, [*scope, child.name])
                continue
            if isinstance(child, ast.Call):
                target = child.func
                name = target.attr if isinstance(target, ast.Attribute) else None
                if name in ("create_task", "ensure_future"):
                    found.add(".".join(scope))
            visit(child, scope)

    visit(ast.parse(path.read_text()), [])
    return found
