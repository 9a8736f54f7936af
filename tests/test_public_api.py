"""The package ``__init__``s are the public contract: ``kafkalog`` re-exports the user surface, each layer's
package its own names, and the import paths the README and docs cited before issue 22 still work (one
release)."""

from __future__ import annotations

import subprocess
import sys

import kafkalog
import kafkalog.cleaner
import kafkalog.errors
import kafkalog.log
import kafkalog.manager
import kafkalog.readonly


def test_the_top_level_package_re_exports_the_user_surface() -> None:
    assert kafkalog.LogManager is kafkalog.manager.LogManager
    assert kafkalog.Log is kafkalog.log.Log
    assert kafkalog.LogConfig is kafkalog.log.LogConfig
    assert kafkalog.ReadOnlyDataDir is kafkalog.readonly.ReadOnlyDataDir
    for name in kafkalog.errors.__all__:
        assert getattr(kafkalog, name) is getattr(kafkalog.errors, name), name
    assert set(kafkalog.__all__) >= {"LogManager", "Log", "LogConfig", "ReadOnlyDataDir", "KafkaError"}
    assert not [name for name in kafkalog.__all__ if not hasattr(kafkalog, name)]


def test_importing_kafkalog_stays_cheap() -> None:
    """PySpark imports the data source module at every session: ``import kafkalog`` loads no engine."""
    code = (
        "import sys, kafkalog; print(sorted(m for m in sys.modules if m.startswith(('kafkalog.', 'numba'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "['kafkalog.errors']"


def test_the_import_paths_the_docs_cited_still_work() -> None:
    from kafkalog.log.cleaner_filter import filter_chunk
    from kafkalog.log.cleaner_service import LogCleaner
    from kafkalog.log.committed import iter_committed
    from kafkalog.log.readonly import ReadOnlyDataDir
    from kafkalog.manager import LogManager
    from kafkalog.manager_limits import check_new_partitions
    from kafkalog.topics import TopicRegistry

    assert ReadOnlyDataDir is kafkalog.readonly.ReadOnlyDataDir
    assert iter_committed is kafkalog.readonly.iter_committed
    assert LogCleaner is kafkalog.cleaner.LogCleaner
    assert filter_chunk is kafkalog.cleaner.filter.filter_chunk
    assert LogManager is kafkalog.LogManager
    assert check_new_partitions is kafkalog.manager.limits.check_new_partitions
    assert TopicRegistry is kafkalog.manager.topics.TopicRegistry
