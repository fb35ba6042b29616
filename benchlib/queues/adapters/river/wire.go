package main

// The adapter's stdout: one writer, under a lock, so lines never interleave, and
// `handled` events batched into one line per flush (cheaper than a line a job).

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Go's monotonic clock is CLOCK_MONOTONIC on Linux, but it is not exposed as such:
// read CLOCK_MONOTONIC once and add Go's monotonic elapsed time to it, so every
// handled time is on the clock benchlib uses, without a syscall per job.
var monoBase, monoStart = clockMonotonic(), time.Now()

func clockMonotonic() int64 {
	var ts syscall.Timespec
	const clockMonotonicID = 1
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonicID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		panic(errno)
	}
	return ts.Nano()
}

func nowNs() int64 { return monoBase + int64(time.Since(monoStart)) }

type writer struct {
	mu      sync.Mutex
	out     *bufio.Writer
	handled [][2]int64 // reported, not yet written
	wake    chan struct{}
}

func newWriter() *writer {
	w := &writer{out: bufio.NewWriterSize(os.Stdout, 1<<16), wake: make(chan struct{}, 1)}
	go w.flushLoop()
	return w
}

// BENCH_HANDLED_SYNC=1 (CONTRACT.md): each job's event written before its handler returns, so a
// SIGKILL never takes away the report of a job the system went on to complete.
var handledSync = os.Getenv("BENCH_HANDLED_SYNC") == "1"

// Handled records that the handler ran for seq; a background flush writes it soon (at once
// with handledSync).
func (w *writer) Handled(seq int64) {
	t := nowNs()
	w.mu.Lock()
	w.handled = append(w.handled, [2]int64{seq, t})
	if handledSync {
		w.writeHandledLocked()
	}
	w.mu.Unlock()
	if handledSync {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Line writes one message, after any pending handled events: so a `stop` reply
// always follows the events of the jobs its workers handled.
func (w *writer) Line(msg any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writeHandledLocked()
	w.writeLocked(msg)
}

func (w *writer) Error(err error, seq *int64) {
	w.Line(map[string]any{"error": oneLine(err.Error()), "seq": seq})
}

func (w *writer) flushLoop() {
	for range w.wake {
		time.Sleep(2 * time.Millisecond) // let a few more jobs join the line
		w.mu.Lock()
		w.writeHandledLocked()
		w.mu.Unlock()
	}
}

func (w *writer) writeHandledLocked() {
	if len(w.handled) == 0 {
		return
	}
	w.writeLocked(map[string]any{"handled": w.handled})
	w.handled = nil
}

func (w *writer) writeLocked(msg any) {
	b, err := json.Marshal(msg)
	if err != nil {
		b, _ = json.Marshal(map[string]any{"error": oneLine(err.Error()), "seq": nil})
	}
	w.out.Write(append(b, '\n'))
	w.out.Flush()
}

func oneLine(s string) string {
	for i, c := range s {
		if c == '\n' || c == '\r' {
			return s[:i]
		}
	}
	return s
}
