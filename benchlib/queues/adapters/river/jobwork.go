package main

import (
	"fmt"
	"time"
)

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
