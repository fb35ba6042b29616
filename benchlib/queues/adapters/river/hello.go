package main

import (
	"runtime/debug"
	"time"

	"github.com/riverqueue/river"
)

// Hello is the adapter's first line: what runs, with every setting that bounds
// throughput (River's defaults, read from its constants where it exports them).
func (s *system) Hello() map[string]any {
	return map[string]any{
		"system": "river", "version": "river " + moduleVersion("github.com/riverqueue/river"), "contract": 2,
		"batch": false, // a fetch takes MaxWorkers minus the running jobs: no knob of its own
		"settings": map[string]any{
			// BENCH_SETTINGS may override these two (from 1 ms, River's FetchCooldownMin and
			// FetchPollIntervalMin; the poll interval no shorter than the cooldown)
			"fetch_cooldown_ms":      s.settings.FetchCooldown.Milliseconds(),
			"fetch_poll_interval_ms": s.settings.FetchPollInterval.Milliseconds(),
			// one fetch per cooldown at most, of at most max_workers jobs: with a
			// no-op handler that caps throughput at max_workers / fetch_cooldown
			"max_workers":        "concurrency",
			"fetch_limit_jobs":   "max_workers - running jobs",
			"ceiling_jobs_per_s": "max_workers * 1000 / fetch_cooldown_ms",
			// River's internal batch completer marks jobs completed every 250 ms, or
			// on its 50 ms tick once 100 wait: not configurable, and workers do not wait for it
			"completer_flush_interval_ms":   250,
			"completer_flush_at_jobs":       100,
			"rescue_stuck_jobs_after_s":     3600, // RescueStuckJobsAfter default: a killed worker's running jobs wait this long
			"job_timeout_s":                 int64(river.JobTimeoutDefault / time.Second),
			"completed_job_retention_s":     86400, // completed rows stay in river_job this long
			"insert_notify_min_interval_ms": s.settings.FetchCooldown.Milliseconds(),
			"pool_max_conns":                poolMaxConns,
			"listen_notify":                 true,
		},
		"tables": []string{schema + ".river_job"},
		// river_notification is the outbox of River's SQLite driver: it stays empty here
		"control_tables": []string{schema + ".river_leader", schema + ".river_queue", schema + ".river_migration", schema + ".river_notification"},
	}
}

func moduleVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "unknown"
}
