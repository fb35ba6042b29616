// The River adapter of benchlib's JSON-lines worker contract, version 2
// (../CONTRACT.md): River's public API only, every request in a goroutine of its own.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

type request struct {
	ID          json.RawMessage   `json:"id"`
	Op          string            `json:"op"`
	Payloads    []json.RawMessage `json:"payloads"`
	Concurrency int               `json:"concurrency"`
	Batch       *int              `json:"batch"`
	Continuous  bool              `json:"continuous"`
	JobWork     *jobWork          `json:"job_work"`
	WithinS     float64           `json:"within_s"`
}

func main() {
	w := newWriter()
	dsn := os.Getenv("BENCH_DSN")
	if dsn == "" {
		fmt.Fprintln(os.Stderr, "BENCH_DSN is not set")
		os.Exit(2)
	}
	ctx := context.Background()
	sys, err := newSystem(ctx, dsn, w)
	if err != nil {
		fmt.Fprintln(os.Stderr, "river adapter:", err)
		os.Exit(1)
	}
	w.Line(map[string]any{"hello": sys.Hello()}) // before reading anything
	if sys.refusal != "" {
		fmt.Fprintln(os.Stderr, sys.refusal)
	}

	var inflight sync.WaitGroup
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			inflight.Add(1)
			go func() { defer inflight.Done(); serve(ctx, sys, w, line) }()
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "river adapter: stdin:", err)
			}
			break
		}
	}
	// stdin closed: the harness is gone or done, so stop the workers and leave.
	inflight.Wait()
	sys.ReleasePool() // pgxpool's Close waits for every acquired connection
	if err := sys.Stop(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "river adapter: stop:", err)
	}
	sys.Close()
}

func serve(ctx context.Context, sys *system, w *writer, line []byte) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		w.Error(fmt.Errorf("bad request: %w", err), nil)
		return
	}
	reply, err := handle(ctx, sys, &req)
	if err != nil {
		reply = map[string]any{"ok": false, "error": oneLine(err.Error())}
	}
	reply["id"] = req.ID
	w.Line(reply)
}

func handle(ctx context.Context, sys *system, req *request) (map[string]any, error) {
	if sys.refusal != "" { // BENCH_SETTINGS asked for what River cannot run: say so to every request
		return nil, errors.New(sys.refusal)
	}
	ok := map[string]any{"ok": true}
	switch req.Op {
	case "install":
		return ok, sys.Install(ctx)
	case "uninstall":
		return ok, sys.Uninstall(ctx)
	case "enqueue":
		ids, err := sys.Enqueue(ctx, req.Payloads, false)
		return map[string]any{"ok": true, "ids": ids}, err
	case "produce":
		_, err := sys.Enqueue(ctx, req.Payloads, true)
		return ok, err
	case "work":
		if req.Concurrency < 1 {
			return nil, fmt.Errorf("work needs concurrency >= 1, got %d", req.Concurrency)
		}
		if err := req.JobWork.check(); err != nil {
			return nil, err
		}
		settings, err := sys.Work(ctx, req.Concurrency, req.JobWork)
		return map[string]any{"ok": true, "settings": settings}, err
	case "stop":
		sys.ReleasePool() // the workers' last queries need their connections
		return ok, sys.Stop(ctx)
	case "hold_pool":
		within := req.WithinS
		if within <= 0 {
			within = 2
		}
		return sys.HoldPool(time.Duration(within * float64(time.Second)))
	case "release_pool":
		return map[string]any{"ok": true, "held": sys.ReleasePool()}, nil
	}
	return nil, fmt.Errorf("unknown op %q", req.Op)
}
