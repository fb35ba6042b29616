package main

// BENCH_SETTINGS (../CONTRACT.md): a JSON object that overrides the settings that bound
// River's throughput or when it rescues a dead worker's jobs, by the names the hello reports. A key we do not know, or a value
// River would refuse, is not ignored: the adapter still says hello, then answers every
// request with one line naming it.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/riverqueue/river"
)

// settings are the values a Client runs with (River's defaults unless overridden).
type settings struct {
	FetchCooldown     time.Duration // at most one fetch per cooldown; also the insert client's NOTIFY limit
	FetchPollInterval time.Duration // fallback poll when no NOTIFY arrives
	// A running job whose attempt began longer than RescueStuckJobsAfter ago (a SIGKILLed or
	// SIGSTOPped worker's) is set retryable by the leader's rescuer, which runs every 30 s
	// (maintenance.JobRescuerIntervalDefault; no Config field sets it) and skips a job younger
	// than JobTimeout, and every job when JobTimeout is -1 (job_rescuer.go makeRetryDecision).
	JobTimeout           time.Duration // -1: no timeout (and no rescue)
	RescueStuckJobsAfter time.Duration
	// Config.PollOnly: no LISTEN, so new jobs wait for FetchPollInterval (River's default: false)
	PollOnly bool
	// pgxpool's MaxConns of the pool the application hands River: fetches, completions, the
	// LISTEN and the leader's election share it (workers hold none while they run a job)
	PoolMaxConns int32
}

// The pool's size where BENCH_SETTINGS gives none: ours, not River's (pgxpool's default is
// max(4, cores)). Workers hold no connection; fetches, completions, the LISTEN and the elector do.
const poolMaxConnsDefault = 10

// the largest pool_max_conns accepted: PostgreSQL's own limit of max_connections
const poolMaxConnsMax = 262143

// River's JobRescuerRescueAfterDefault (internal/maintenance/job_rescuer.go, not exported):
// RescueStuckJobsAfter's default, or JobTimeout plus this when only JobTimeout is set.
const rescueAfterDefault = time.Hour

// A duration in whole units (ms or s), from a minimum to the largest a time.Duration holds;
// `infinite`: -1 is accepted too, River's "no limit".
type durationSetting struct {
	unit     time.Duration
	min      time.Duration
	max      int64 // in units
	infinite bool
	field    func(*settings) *time.Duration
}

const (
	maxMs = math.MaxInt64 / int64(time.Millisecond)
	maxS  = math.MaxInt64 / int64(time.Second)
	// so that River's default rescue, job timeout + 1 h, still fits a time.Duration
	maxJobTimeoutS = maxS - int64(rescueAfterDefault/time.Second)
)

// The fetch settings' minimum is River's (FetchCooldownMin and FetchPollIntervalMin, 1 ms in
// v0.51.1). River reads 0 as "its default" for the two rescue settings, so they start at 1 s:
// a 0 here would report a value River does not run.
var accepted = map[string]durationSetting{
	"fetch_cooldown_ms":         {time.Millisecond, river.FetchCooldownMin, maxMs, false, func(s *settings) *time.Duration { return &s.FetchCooldown }},
	"fetch_poll_interval_ms":    {time.Millisecond, river.FetchPollIntervalMin, maxMs, false, func(s *settings) *time.Duration { return &s.FetchPollInterval }},
	"job_timeout_s":             {time.Second, time.Second, maxJobTimeoutS, true, func(s *settings) *time.Duration { return &s.JobTimeout }},
	"rescue_stuck_jobs_after_s": {time.Second, time.Second, maxS, false, func(s *settings) *time.Duration { return &s.RescueStuckJobsAfter }},
}

// The settings that are not durations: LISTEN/NOTIFY on or off, and the pool's size.
var acceptedOther = map[string]string{
	"listen_notify":  "true or false",
	"pool_max_conns": fmt.Sprintf("an integer from 1 to %d", poolMaxConnsMax),
}

// readOther applies a setting of acceptedOther; a problem in words, or "".
func readOther(name string, raw json.RawMessage, s *settings) string {
	switch name {
	case "listen_notify":
		switch string(raw) { // JSON's literals only: null, 0 and "false" are refused
		case "true":
			s.PollOnly = false
		case "false":
			s.PollOnly = true
		default:
			return fmt.Sprintf("listen_notify must be true or false, got %s", raw)
		}
	case "pool_max_conns":
		v, ok := integer(raw)
		if !ok || v < 1 || v > poolMaxConnsMax {
			return fmt.Sprintf("pool_max_conns must be %s, got %s", acceptedOther[name], raw)
		}
		s.PoolMaxConns = int32(v)
	}
	return ""
}

func (m durationSetting) rangeText() string {
	text := fmt.Sprintf("an integer from %d to %d", int64(m.min/m.unit), m.max)
	if m.infinite {
		text = "-1 (no timeout: River then never rescues a stuck job) or " + text
	}
	return text
}

// seconds is a duration as the hello reports it: whole seconds, -1 for River's "no timeout".
func seconds(d time.Duration) int64 {
	if d < 0 {
		return -1
	}
	return int64(d / time.Second)
}

// readSettings returns River's defaults with BENCH_SETTINGS applied, and a one-line
// refusal ("" when every key is known and every value accepted).
func readSettings(text string) (settings, string) {
	defaults := settings{FetchCooldown: river.FetchCooldownDefault, FetchPollInterval: river.FetchPollIntervalDefault,
		JobTimeout: river.JobTimeoutDefault, RescueStuckJobsAfter: rescueAfterDefault, PoolMaxConns: poolMaxConnsDefault}
	s := defaults
	if strings.TrimSpace(text) == "" {
		return s, ""
	}
	var requested map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &requested); err != nil || requested == nil {
		return s, "BENCH_SETTINGS must be a JSON object of setting: value"
	}
	names := make([]string, 0, len(requested))
	for name := range requested {
		names = append(names, name)
	}
	sort.Strings(names)
	var problems []string
	for _, name := range names {
		raw := bytes.TrimSpace(requested[name])
		if _, other := acceptedOther[name]; other {
			if problem := readOther(name, raw, &s); problem != "" {
				problems = append(problems, problem)
			}
			continue
		}
		setting, ok := accepted[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown key %q; this adapter overrides only %s", name, acceptedText()))
			continue
		}
		v, ok := integer(raw)
		if setting.infinite && ok && v == -1 {
			*setting.field(&s) = -1
			continue
		}
		if !ok || v < int64(setting.min/setting.unit) || v > setting.max {
			problems = append(problems, fmt.Sprintf("%s must be %s, got %s", name, setting.rangeText(), raw))
			continue
		}
		*setting.field(&s) = time.Duration(v) * setting.unit
	}
	// River's Config.WithDefaults: with JobTimeout set and RescueStuckJobsAfter not, the rescue
	// default is JobTimeout + 1 h (its code does so for any JobTimeout over 0, its comment says over 1 h)
	if !isSet(requested, "rescue_stuck_jobs_after_s") && isSet(requested, "job_timeout_s") && s.JobTimeout > 0 {
		s.RescueStuckJobsAfter = s.JobTimeout + rescueAfterDefault
	}
	// River's Config.validate: "FetchPollInterval cannot be shorter than FetchCooldown"
	if len(problems) == 0 && s.FetchPollInterval < s.FetchCooldown {
		problems = append(problems, fmt.Sprintf("fetch_poll_interval_ms (%d) cannot be shorter than fetch_cooldown_ms (%d), as River requires",
			s.FetchPollInterval.Milliseconds(), s.FetchCooldown.Milliseconds()))
	}
	// River's Config.validate: "RescueStuckJobsAfter cannot be less than JobTimeout" (equal is allowed; a JobTimeout of -1 passes)
	if len(problems) == 0 && s.RescueStuckJobsAfter < s.JobTimeout {
		whose := ""
		if !isSet(requested, "job_timeout_s") {
			whose = ", River's default"
		}
		problems = append(problems, fmt.Sprintf("rescue_stuck_jobs_after_s (%d) cannot be less than job_timeout_s (%d%s), as River requires",
			seconds(s.RescueStuckJobsAfter), seconds(s.JobTimeout), whose))
	}
	if len(problems) > 0 { // nothing applied: the hello reports the defaults
		return defaults, oneLine("BENCH_SETTINGS: " + strings.Join(problems, "; "))
	}
	return s, ""
}

func acceptedText() string {
	names := make([]string, 0, len(accepted)+len(acceptedOther))
	for name := range accepted {
		names = append(names, name)
	}
	for name := range acceptedOther {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		if text, other := acceptedOther[name]; other {
			parts[i] = fmt.Sprintf("%s (%s)", name, text)
		} else {
			parts[i] = fmt.Sprintf("%s (%s)", name, accepted[name].rangeText())
		}
	}
	return strings.Join(parts, ", ")
}

// integer reads a JSON integer: "1.5", "1e3" and strings are refused.
func integer(raw json.RawMessage) (int64, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var value any
	if err := dec.Decode(&value); err != nil {
		return 0, false
	}
	n, isNumber := value.(json.Number)
	if !isNumber {
		return 0, false
	}
	v, err := n.Int64()
	return v, err == nil
}

func isSet(requested map[string]json.RawMessage, name string) bool {
	_, ok := requested[name]
	return ok
}

func settingsFromEnv() (settings, string) { return readSettings(os.Getenv("BENCH_SETTINGS")) }
