package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Work starts a River client whose default queue runs `concurrency` workers. The
// same client serves a backlog and a live producer: LISTEN/NOTIFY wakes it for new
// jobs, so `continuous` changes nothing here.
func (s *system) Work(ctx context.Context, concurrency int, work *jobWork) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker != nil {
		return nil, fmt.Errorf("workers are already running")
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[workArgs]) error {
		work.run() // the job's work (none: nothing), then report, return
		s.w.Handled(job.Args.Seq)
		return nil
	}))
	config := s.config()
	config.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: concurrency}}
	config.Workers = workers
	client, err := river.NewClient(s.driver, config)
	if err != nil {
		return nil, err
	}
	failed, cancel := client.Subscribe(river.EventKindJobFailed)
	go s.reportFailures(failed)
	if err := client.Start(ctx); err != nil {
		cancel()
		return nil, err
	}
	s.worker = client
	reply := map[string]any{} // the hello's settings that are numbers or switches, then this run's
	for name, v := range s.Hello()["settings"].(map[string]any) {
		switch v.(type) {
		case int, int32, int64, float64, bool:
			reply[name] = v
		}
	}
	reply["max_workers"], reply["fetch_limit_jobs"] = concurrency, concurrency
	work.describe(reply)
	reply["ceiling_jobs_per_s"] = float64(concurrency) * float64(time.Second) / float64(s.settings.FetchCooldown)
	return reply, nil
}

// A failed job does not end the adapter: it goes out as an error event.
func (s *system) reportFailures(events <-chan *river.Event) {
	for ev := range events {
		var a workArgs
		_ = json.Unmarshal(ev.Job.EncodedArgs, &a)
		msg := "job failed"
		if n := len(ev.Job.Errors); n > 0 {
			msg = ev.Job.Errors[n-1].Error
		}
		s.w.Error(fmt.Errorf("river: %s", msg), &a.Seq)
	}
}

// Stop waits for running jobs and River's completer, so every handled job is
// marked completed in river_job before the reply.
func (s *system) Stop(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker == nil {
		return nil
	}
	err := s.worker.Stop(ctx)
	s.worker = nil
	return err
}

// poolHold is application code holding every connection of the pool it shares with
// River's client (the chaos study's pool_exhaustion fault, CONTRACT.md's hold_pool):
// one Acquire per connection the pool may open, all queued at once, so each
// connection River gives back comes to us and River's next Acquire waits behind ours.
type poolHold struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	held   []*pgxpool.Conn
}

// HoldPool queues the acquires and answers with how many connections are held after within.
func (s *system) HoldPool(within time.Duration) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker == nil || s.hold != nil {
		return nil, errors.New("hold_pool needs running workers and a pool not already held")
	}
	s.dbMu.RLock()
	pool := s.pool
	s.dbMu.RUnlock()
	ctx, cancel := context.WithCancel(context.Background())
	h := &poolHold{cancel: cancel}
	size := int(pool.Config().MaxConns)
	for i := 0; i < size; i++ {
		h.done.Add(1)
		go func() {
			defer h.done.Done()
			conn, err := pool.Acquire(ctx)
			if err != nil {
				return // cancelled by the release
			}
			h.mu.Lock()
			h.held = append(h.held, conn)
			h.mu.Unlock()
		}()
	}
	s.hold = h
	time.Sleep(within)
	h.mu.Lock()
	held := len(h.held)
	h.mu.Unlock()
	return map[string]any{"ok": true, "held": held, "pool_max": size}, nil
}

// ReleasePool cancels the acquires still waiting and gives every held connection back.
func (s *system) ReleasePool() int {
	s.mu.Lock()
	h := s.hold
	s.hold = nil
	s.mu.Unlock()
	if h == nil {
		return 0
	}
	h.cancel()
	h.done.Wait()
	for _, conn := range h.held {
		conn.Release()
	}
	return len(h.held)
}

// jobWork is the `job_work` of a work request (../CONTRACT.md): what each job's
// handler does before it reports the job. nil: nothing, the no-op handler.
type jobWork struct {
	Kind string  `json:"kind"`
	Ms   float64 `json:"ms"`
}

func (j *jobWork) check() error {
	if j == nil {
		return nil
	}
	if (j.Kind != "wait" && j.Kind != "cpu") || j.Ms <= 0 || j.Ms > 1000 {
		return fmt.Errorf("job_work %+v: kind wait or cpu, ms above 0 and at most 1000", *j)
	}
	return nil
}

// run does one job's work: a wait (the goroutine sleeps; River's other workers
// run meanwhile) or a busy loop of ms on this goroutine's thread.
func (j *jobWork) run() {
	if j == nil {
		return
	}
	d := time.Duration(j.Ms * float64(time.Millisecond))
	if j.Kind == "wait" {
		time.Sleep(d)
		return
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// describe adds the work in force to a work reply's settings (nil: nothing).
func (j *jobWork) describe(settings map[string]any) {
	if j != nil {
		settings["job_"+j.Kind+"_ms"] = j.Ms
	}
}
