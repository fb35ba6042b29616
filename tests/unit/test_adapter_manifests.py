"""Each adapter's manifest lists the BENCH_SETTINGS keys it accepts, and its registry entry says so
(`settable`), so a variant naming a key the adapter lacks is refused before any server starts."""
from __future__ import annotations

import pytest

from benchlib.errors import BenchError
from benchlib.queues import QUEUES, adapter_builds
from benchlib.queues.adapter_builds import adapter_system


@pytest.mark.parametrize("m", adapter_builds.every(), ids=lambda m: m.system)
def test_settable_lists_the_manifests_keys(m):
    assert m.settings, f"{m.system}'s manifest lists no settings"
    assert all(isinstance(v, str) and v.strip() and "\n" not in v.strip() for v in m.settings.values())
    assert adapter_system(m.folder.name).caps.settable == m.settings
    assert QUEUES[m.system].caps.settable == m.settings  # the registered entry, and its variants
    for variant in (cls for name, cls in QUEUES.items() if name.startswith(m.system + "-")):
        assert variant.caps.settable == m.settings and set(variant.overrides) <= set(m.settings)


def test_the_adapters_list_their_rescue_listen_and_pool_settings():
    assert set(adapter_builds.manifest("river").settings) == {
        "fetch_cooldown_ms", "fetch_poll_interval_ms", "job_timeout_s", "rescue_stuck_jobs_after_s",
        "listen_notify", "pool_max_conns"}
    assert set(adapter_builds.manifest("pg-boss").settings) == {
        "polling_interval_s", "expire_in_s", "maintenance_interval_s", "pool_max_conns"}
    assert set(adapter_builds.manifest("graphile-worker").settings) == {
        "poll_interval_ms", "complete_job_batch_delay_ms", "fail_job_batch_delay_ms", "pool_max_conns"}


def test_a_variant_naming_a_key_the_adapter_lacks_is_refused_before_anything_starts():
    with pytest.raises(BenchError, match="river adapter has no setting rescue_after_s; it accepts fetch_cooldown_ms"):
        adapter_system("river", "typo", {"rescue_after_s": 5, "job_timeout_s": 5})
    assert adapter_system("pg-boss", "ok", {"expire_in_s": 10}).overrides == {"expire_in_s": 10}
