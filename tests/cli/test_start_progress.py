"""What `replog cluster start` says while it waits (`StartProgress`): each phase once as it
passes, in order; nothing more while a phase takes less than `SILENT_S`; past it, what the
next phase waits for, repeated every `REPEAT_S`; a phase lost and passed again is said again."""

from __future__ import annotations

from replog.cli.start_progress import REPEAT_S, SILENT_S, StartProgress

LINES = ["quorum: node 2 elected leader (epoch 1)", "all 3 nodes answer", "brokers up"]


def test_each_phase_is_said_once_as_it_passes() -> None:
    said: list[str] = []
    progress = StartProgress(said.append, now=0.0)
    progress.at(0, LINES, "a quorum leader (connection refused)", now=1.0)
    assert said == []
    progress.at(2, LINES, "every broker to register", now=2.0)  # two phases in one poll
    progress.at(2, LINES, "every broker to register", now=2.1)
    progress.at(3, LINES, "", now=3.0)
    assert said == LINES


def test_a_slow_phase_says_what_it_waits_for_and_says_it_again_later() -> None:
    said: list[str] = []
    progress = StartProgress(said.append, now=0.0)
    progress.at(1, LINES, "every node to answer (none yet from node 3)", now=1.0)
    progress.at(1, LINES, "every node to answer (none yet from node 3)", now=1.0 + SILENT_S - 0.1)
    assert said == LINES[:1]
    progress.at(1, LINES, "every node to answer (none yet from node 3)", now=1.0 + SILENT_S)
    assert said[1:] == [
        f"waiting for every node to answer (none yet from node 3) ({SILENT_S:.0f} s so far)"
    ]
    progress.at(1, LINES, "every node to answer", now=1.0 + SILENT_S + REPEAT_S - 0.1)
    assert len(said) == 2
    progress.at(1, LINES, "every node to answer", now=1.0 + SILENT_S + REPEAT_S)
    assert said[2] == f"waiting for every node to answer ({SILENT_S + REPEAT_S:.0f} s so far)"


def test_a_phase_lost_and_passed_again_is_said_again() -> None:
    said: list[str] = []
    progress = StartProgress(said.append, now=0.0)
    progress.at(2, LINES, "every broker", now=1.0)
    progress.at(0, LINES, "a quorum leader", now=2.0)  # the leader lost its quorum
    progress.at(3, [LINES[0].replace("node 2", "node 3"), *LINES[1:]], "", now=3.0)
    assert said == [*LINES[:2], "quorum: node 3 elected leader (epoch 1)", *LINES[1:]]


def test_a_phase_with_nothing_to_say_is_passed_silently() -> None:
    said: list[str] = []
    StartProgress(said.append, now=0.0).at(3, [LINES[0], LINES[1], None], "", now=1.0)
    assert said == LINES[:2]
