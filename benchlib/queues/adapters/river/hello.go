package main

import "runtime/debug"

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
			"completer_flush_interval_ms": 250,
			"completer_flush_at_jobs":     100,
			// BENCH_SETTINGS may override these two (whole seconds; the rescue no shorter than the
			// timeout; job_timeout_s -1: none, and no rescue): a killed or stopped worker's running
			// jobs wait this long, then up to 30 s for the leader's rescuer (not configurable), about
			// 1 s of retry backoff and up to 5 s for River's scheduler to make them available again
			"rescue_stuck_jobs_after_s":     seconds(s.settings.RescueStuckJobsAfter),
			"job_timeout_s":                 seconds(s.settings.JobTimeout),
			"completed_job_retention_s":     86400, // completed rows stay in river_job this long
			"insert_notify_min_interval_ms": s.settings.FetchCooldown.Milliseconds(),
			// BENCH_SETTINGS may override these two: the application's pgxpool (10 unless set;
			// workers hold none while they run a job) and LISTEN/NOTIFY (off: Config.PollOnly,
			// so a new job waits up to fetch_poll_interval_ms)
			"pool_max_conns": s.pool.Config().MaxConns, // as pgxpool took it
			"listen_notify":  !s.settings.PollOnly,
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
