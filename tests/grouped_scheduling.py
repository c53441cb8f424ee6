"""The suite's xdist scheduler: groups of tests, each kept on one worker, in order, every other
test its own unit (tests/conftest.py says which tests form the groups and why), and a run that
goes on after a worker dies.

xdist 3.8.0's LoadScopeScheduling (which `--dist loadgroup` uses) hangs the whole run when a
worker dies: it puts every unit the dead worker ever held back on the queue, completed ones
included, and a completed unit handed to a worker is sent as an empty batch that never reports
back, so the run waits forever at its end (pytest-xdist issues 1323 and 1378). It also starts
the test the worker died on again, which took the replacement down with it when that test was
the cause (issue 1371). Here a dead worker's unfinished tests go back on the queue, less the
one it died on (xdist reports that one as failed, naming it), and a worker is always given at
least two tests while any are queued, because a worker runs a test only once it holds the next
one or is told to stop (issue 1327).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any


def grouped_scheduler(
    config: Any, log: Any, group_of: Callable[[str], str | None], last: Sequence[str] = ()
) -> Any:
    """A LoadScopeScheduling whose only multi-test units are the groups `group_of` names by node
    id (None: a unit of its own), the groups named in `last` handed out after every other unit,
    in that order, and which survives a worker's death (module docstring)."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupedScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            # A group's name has no "::", so it is never a test's node id.
            return group_of(nodeid) or nodeid

        def _assign_work_unit(self, node: Any) -> None:
            # The queue is sorted largest unit first; a later group waits at its end.
            for scope in last:
                if scope in self.workqueue:
                    self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

        def remove_node(self, node: Any) -> str | None:
            workload = self.assigned_work.pop(node)
            unfinished = {
                scope: {nodeid: False for nodeid, done in unit.items() if not done}
                for scope, unit in workload.items()
            }
            unfinished = {scope: unit for scope, unit in unfinished.items() if unit}
            if not unfinished:
                return None
            # A worker runs its tests in the order it was sent them: the first unfinished one
            # is the one it died on.
            scope, unit = next(iter(unfinished.items()))
            crashed = next(iter(unit))
            del unit[crashed]
            if not unit:
                del unfinished[scope]
            self.workqueue.update(unfinished)
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

        def _reschedule(self, node: Any) -> None:
            if node.shutting_down:
                return
            if not self.workqueue:
                node.shutdown()
                return
            if self._pending_of(self.assigned_work[node]) > 2:
                return
            self._assign_work_unit(node)
            while self.workqueue and self._pending_of(self.assigned_work[node]) < 2:
                self._assign_work_unit(node)

    return GroupedScheduling(config, log)
