package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

const (
	// River's tables go in a schema of their own, so install and uninstall can
	// also clear what a killed earlier run left behind.
	schema = "river"
)

// insertArgs carries a harness payload through InsertMany byte for byte.
type insertArgs json.RawMessage

func (insertArgs) Kind() string                   { return "bench" }
func (a insertArgs) MarshalJSON() ([]byte, error) { return a, nil }

// workArgs is the same job as its worker sees it: only the seq is decoded.
type workArgs struct {
	Seq int64 `json:"seq"`
}

func (workArgs) Kind() string { return "bench" }

type system struct {
	dsn      string
	w        *writer
	logger   *slog.Logger
	settings settings // River's defaults, set explicitly so hello reports what runs; BENCH_SETTINGS overrides
	refusal  string   // why BENCH_SETTINGS cannot run: every request is answered with it

	dbMu   sync.RWMutex // install and uninstall swap the pool; the others share it
	pool   *pgxpool.Pool
	driver *riverpgxv5.Driver
	insert *river.Client[pgx.Tx] // an insert-only client: no queues

	mu     sync.Mutex
	worker *river.Client[pgx.Tx] // the running workers, nil when stopped
	hold   *poolHold             // application code holding the pool (hold_pool), nil when not
}

func newSystem(ctx context.Context, dsn string, w *writer) (*system, error) {
	s := &system{dsn: dsn, w: w,
		logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	s.settings, s.refusal = settingsFromEnv()
	return s, s.connect(ctx)
}

// config is a river.Config with the settings: the insert client's FetchCooldown is the
// minimum interval of its insert NOTIFYs, so it takes the workers' value too. The rescue
// settings matter only to a started client's leader; the insert client is validated with them.
func (s *system) config() *river.Config {
	return &river.Config{Schema: schema, Logger: s.logger,
		FetchCooldown: s.settings.FetchCooldown, FetchPollInterval: s.settings.FetchPollInterval,
		JobTimeout: s.settings.JobTimeout, RescueStuckJobsAfter: s.settings.RescueStuckJobsAfter,
		PollOnly: s.settings.PollOnly}
}

// connect opens a fresh pool. pgx caches prepared statements per connection, and
// a statement prepared against the tables an install dropped fails ("cached plan
// must not change result type"), so every install and uninstall starts a new pool.
func (s *system) connect(ctx context.Context) error {
	cfg, err := pgxpool.ParseConfig(s.dsn) // accepts libpq URLs with host= in the query
	if err != nil {
		return err
	}
	cfg.MaxConns = s.settings.PoolMaxConns
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	driver := riverpgxv5.New(pool)
	insert, err := river.NewClient(driver, s.config())
	if err != nil {
		pool.Close()
		return err
	}
	if s.pool != nil {
		s.pool.Close()
	}
	s.pool, s.driver, s.insert = pool, driver, insert
	return nil
}

func (s *system) Close() { s.pool.Close() }

// Install drops the schema an earlier install made, then runs River's own migrations.
func (s *system) Install(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if err := s.connect(ctx); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE; CREATE SCHEMA "+schema); err != nil {
		return err
	}
	m, err := rivermigrate.New(s.driver, &rivermigrate.Config{Schema: schema, Logger: s.logger})
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// Uninstall runs River's migrations all the way down, then drops the schema.
func (s *system) Uninstall(ctx context.Context) error {
	if err := s.Stop(ctx); err != nil {
		return err
	}
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	if err := s.connect(ctx); err != nil {
		return err
	}
	m, err := rivermigrate.New(s.driver, &rivermigrate.Config{Schema: schema, Logger: s.logger})
	if err != nil {
		return err
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".river_migration").Scan(&exists); err != nil {
		return err
	}
	if exists {
		if _, err := m.Migrate(ctx, rivermigrate.DirectionDown, &rivermigrate.MigrateOpts{TargetVersion: -1}); err != nil {
			return err
		}
	}
	_, err = s.pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	return err
}

// Enqueue inserts one job per payload in one InsertMany call; with report, it
// writes the `enqueued` event once River has acknowledged them.
func (s *system) Enqueue(ctx context.Context, payloads []json.RawMessage, report bool) ([]int64, error) {
	params := make([]river.InsertManyParams, len(payloads))
	for i, p := range payloads {
		params[i] = river.InsertManyParams{Args: insertArgs(p)}
	}
	s.dbMu.RLock()
	results, err := s.insert.InsertMany(ctx, params)
	s.dbMu.RUnlock()
	if err != nil {
		return nil, err
	}
	t := nowNs()
	ids := make([]int64, len(results))
	for i, r := range results {
		ids[i] = r.Job.ID
	}
	if report {
		enqueued := make([][2]int64, len(payloads))
		for i, p := range payloads {
			var a workArgs
			if err := json.Unmarshal(p, &a); err != nil {
				return nil, fmt.Errorf("payload %d has no integer seq: %w", i, err)
			}
			enqueued[i] = [2]int64{a.Seq, t}
		}
		s.w.Line(map[string]any{"enqueued": enqueued})
	}
	return ids, nil
}
