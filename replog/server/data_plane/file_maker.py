"""Whether a broker's new logs' files are made by a file maker process, and starting one.

Rules:
- Off unless the process asks (`make_new_log_files_in_a_process`): `replog node` does, as it
  sets the process's other settings (`bulk_threads.share_the_gil_promptly`,
  `collector.install_growth_freezer`); an embedding application's brokers keep the bulk
  threads unless it asks, since the child is a process of its own it did not start.
- A broker uses one only over the plain `OsFileSystem` (`LogManager.plain_file_system`): a
  subclass injecting faults (tests) must see every file operation, which a child cannot call.
- `start_file_maker` blocks (it starts a process): a broker calls it off its event loop, and
  says in one INFO line which maker it uses. A child that cannot start is a WARNING and the
  bulk threads' path, not a failed start.
"""

from __future__ import annotations

import logging

from replog.storage.file_maker_process import FileMakerProcess
from replog.storage.log_manager import LogManager

log = logging.getLogger("replog.server")

_wanted = False


def make_new_log_files_in_a_process(wanted: bool = True) -> None:
    """From now on, brokers of this process start a file maker process (module Rules)."""
    global _wanted
    _wanted = wanted


def start_file_maker(log_manager: LogManager, broker_id: int) -> FileMakerProcess | None:
    """A file maker process for the broker's new logs, or None (the bulk threads make them);
    blocks: not on an event loop."""
    maker = None
    if _wanted and log_manager.plain_file_system:
        try:
            maker = FileMakerProcess.start()
        except OSError as exc:
            log.warning("broker %d: no file maker process: %s", broker_id, exc)
    if maker is None:
        log.info("broker %d: new logs' files are made by the bulk threads", broker_id)
    else:
        log.info("broker %d: new logs' files are made by file maker pid %d", broker_id, maker.pid)
    return maker
