package main

// BENCH_SETTINGS (../CONTRACT.md): a JSON object that overrides the settings that bound
// River's throughput, by the names the hello reports. A key we do not know, or a value
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
}

// A duration in whole milliseconds, from River's minimum (FetchCooldownMin and
// FetchPollIntervalMin, 1 ms in v0.51.1) to the largest a time.Duration holds.
type msSetting struct {
	min   time.Duration
	field func(*settings) *time.Duration
}

const maxMs = math.MaxInt64 / int64(time.Millisecond)

var accepted = map[string]msSetting{
	"fetch_cooldown_ms":      {river.FetchCooldownMin, func(s *settings) *time.Duration { return &s.FetchCooldown }},
	"fetch_poll_interval_ms": {river.FetchPollIntervalMin, func(s *settings) *time.Duration { return &s.FetchPollInterval }},
}

func (m msSetting) rangeText() string {
	return fmt.Sprintf("an integer from %d to %d", m.min.Milliseconds(), maxMs)
}

// readSettings returns River's defaults with BENCH_SETTINGS applied, and a one-line
// refusal ("" when every key is known and every value accepted).
func readSettings(text string) (settings, string) {
	defaults := settings{FetchCooldown: river.FetchCooldownDefault, FetchPollInterval: river.FetchPollIntervalDefault}
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
		setting, ok := accepted[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("unknown key %q; this adapter overrides only %s", name, acceptedText()))
			continue
		}
		raw := bytes.TrimSpace(requested[name])
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		var value any
		var v int64
		err := dec.Decode(&value)
		if n, isNumber := value.(json.Number); err == nil && isNumber {
			v, err = n.Int64() // an integer: "1.5", "1e3" and strings are refused
		} else {
			err = fmt.Errorf("not a number")
		}
		if err != nil || v < setting.min.Milliseconds() || v > maxMs {
			problems = append(problems, fmt.Sprintf("%s must be %s, got %s", name, setting.rangeText(), raw))
			continue
		}
		*setting.field(&s) = time.Duration(v) * time.Millisecond
	}
	// River's Config.validate: "FetchPollInterval cannot be shorter than FetchCooldown"
	if len(problems) == 0 && s.FetchPollInterval < s.FetchCooldown {
		problems = append(problems, fmt.Sprintf("fetch_poll_interval_ms (%d) cannot be shorter than fetch_cooldown_ms (%d), as River requires",
			s.FetchPollInterval.Milliseconds(), s.FetchCooldown.Milliseconds()))
	}
	if len(problems) > 0 { // nothing applied: the hello reports the defaults
		return defaults, oneLine("BENCH_SETTINGS: " + strings.Join(problems, "; "))
	}
	return s, ""
}

func acceptedText() string {
	names := make([]string, 0, len(accepted))
	for name := range accepted {
		names = append(names, name)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s (%s)", name, accepted[name].rangeText())
	}
	return strings.Join(parts, ", ")
}

func settingsFromEnv() (settings, string) { return readSettings(os.Getenv("BENCH_SETTINGS")) }
