package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/riverqueue/river"
)

// Work starts a River client whose default queue runs `concurrency` workers. The
// same client serves a backlog and a live producer: LISTEN/NOTIFY wakes it for new
// jobs, so `continuous` changes nothing here.
func (s *system) Work(ctx context.Context, concurrency int) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.worker != nil {
		return nil, fmt.Errorf("workers are already running")
	}
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(func(_ context.Context, job *river.Job[workArgs]) error {
		s.w.Handled(job.Args.Seq) // the no-op handler: report, return
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
	reply := map[string]any{} // the hello's settings that are numbers, then this run's
	for name, v := range s.Hello()["settings"].(map[string]any) {
		switch v.(type) {
		case int, int64, float64:
			reply[name] = v
		}
	}
	reply["max_workers"], reply["fetch_limit_jobs"] = concurrency, concurrency
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
