"""Dagster's local compute logs, with the helper processes that mirror them to the terminal deaf to Ctrl-C.

Dagster's LocalComputeLogManager copies a step's stdout and stderr to the terminal through a `tail` process and a
Python "orphan watcher" beside it. They share the terminal's process group, so Ctrl-C reached them too: each
watcher printed a KeyboardInterrupt traceback and the dead `tail` dropped whatever the stage said while it stopped.
This manager starts them with SIGINT blocked (a blocked signal stays blocked across exec), so Ctrl-C reaches only
the processes that handle it; Dagster still stops them itself (SIGTERM) when the step ends, and the watcher
still ends them when the step's process dies. Logs go where Dagster's default puts them ($DAGSTER_HOME/storage).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import Any

from dagster import Field, Float, StringSource
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

# What ensure_dagster_home writes into dagster.yaml (stagekit/resources.py).
DAGSTER_YAML_BLOCK = "compute_logs:\n  module: stagekit.compute_logs\n  class: SparringComputeLogManager\n"


@contextmanager
def sigint_blocked() -> Iterator[None]:
    """SIGINT blocked in this thread for the block: processes started in it inherit the block; a Ctrl-C that
    arrives meanwhile is delivered here when the block ends, not lost."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


class SparringComputeLogManager(LocalComputeLogManager):
    """LocalComputeLogManager whose terminal mirror ignores Ctrl-C; `base_dir` defaults to $DAGSTER_HOME/storage."""

    @classmethod
    def config_type(cls) -> dict[str, Any]:
        return {"base_dir": Field(StringSource, is_required=False), "polling_timeout": Field(Float, is_required=False)}

    @classmethod
    def from_config_value(cls, inst_data: Any, config_value: dict[str, Any]) -> SparringComputeLogManager:
        config = dict(config_value)
        if "base_dir" not in config:
            config["base_dir"] = os.path.join(os.environ["DAGSTER_HOME"], "storage")  # Dagster's default place
        return cls(inst_data=inst_data, **config)

    @contextmanager
    def capture_logs(self, log_key: Sequence[str]) -> Iterator[Any]:
        with ExitStack() as stack:
            with sigint_blocked():  # only while Dagster starts `tail` and its watcher, not while the step runs
                captured = stack.enter_context(super().capture_logs(log_key))
            yield captured
