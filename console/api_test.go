package console

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// keysOf returns the sorted keys of a JSON object.
func keysOf(t *testing.T, raw json.RawMessage) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %s", raw)
	}
	return slices.Sorted(maps.Keys(m))
}

func sortedFields(s string) []string { return slices.Sorted(slices.Values(strings.Fields(s))) }

// TestAPIShapes holds the JSON API to the shapes docs/console.md documents.
func TestAPIShapes(t *testing.T) {
	b := setup(t, Options{Actions: true, Interval: time.Minute})
	busyKernel(t, b, "zombie-task", "nightly-report")
	b.c.sm.take()

	object := func(path string) map[string]json.RawMessage {
		t.Helper()
		var m map[string]json.RawMessage
		b.getJSON(t, path, &m)
		return m
	}
	first := func(raw json.RawMessage) json.RawMessage {
		t.Helper()
		var a []json.RawMessage
		if err := json.Unmarshal(raw, &a); err != nil || len(a) == 0 {
			t.Fatalf("not a non-empty JSON array: %s", raw)
		}
		return a[0]
	}
	check := func(what string, raw json.RawMessage, want string) {
		t.Helper()
		if got := keysOf(t, raw); !slices.Equal(got, sortedFields(want)) {
			t.Errorf("%s keys = %v, want %v", what, got, sortedFields(want))
		}
	}

	ov := object("api/v1/overview")
	raw, _ := json.Marshal(ov)
	check("overview", raw, "time interval_ms rate_span_s running dispatched delayed zombies executors degraded recent_span_s retry_budget_use paused priorities callbacks samples")
	p := first(ov["priorities"])
	check("priority", p, "priority queued running delayed totals rates retry_share wait exec wait_recent")
	var pm map[string]json.RawMessage
	_ = json.Unmarshal(p, &pm)
	check("totals", pm["totals"], "submitted started succeeded failed timed_out retried rejected evicted canceled panics abandoned retries_refused")
	check("rates", pm["rates"], "submitted started succeeded failed timed_out retried rejected retries_refused")
	check("wait", pm["wait"], "count mean_ms p50_ms p90_ms p99_ms p999_ms max_ms")
	check("wait_recent", pm["wait_recent"], "count mean_ms p50_ms p90_ms p99_ms p999_ms max_ms")
	check("callbacks", ov["callbacks"], "events_dropped on_timeout_dropped logs_dropped callback_panics callbacks_abandoned")
	sm := first(ov["samples"])
	check("sample", sm, "t_ms submitted_per_s ended_per_s queued running wait_mean_ms wait_p99_ms")
	var smm map[string]json.RawMessage
	_ = json.Unmarshal(sm, &smm)
	check("wait_mean_ms", smm["wait_mean_ms"], "high normal low")
	check("wait_p99_ms", smm["wait_p99_ms"], "high normal low")

	gs := object("api/v1/groups")
	raw, _ = json.Marshal(gs)
	check("groups", raw, "time groups")
	check("group", first(gs["groups"]), "name paused waiting running keys throttled_keys paused_keys open_breakers throttles rate_limited breaker_opened breaker_half_opened breaker_closed circuit_open_failed")

	ss := object("api/v1/schedules")
	raw, _ = json.Marshal(ss)
	check("schedules", raw, "time scheduler schedules")
	check("schedule", first(ss["schedules"]), "name spec next last fires misfires skipped refused paused ended last_outcome last_outcome_at")

	zs := object("api/v1/zombies")
	raw, _ = json.Marshal(zs)
	check("zombies", raw, "time zombies")
	check("zombie", first(zs["zombies"]), "task_id attempt priority since age_ms stack")

	check("token", mustRaw(t, object("api/v1/token")), "token")
	_, out := b.postJSON(t, "api/v1/pause", map[string]string{"group": "upstream"}, b.c.token)
	check("action", json.RawMessage(out), "ok action target")
	var res actionResult
	_ = json.Unmarshal([]byte(out), &res)
	if res != (actionResult{OK: true, Action: "pause", Target: `group "upstream"`}) {
		t.Errorf("action answer = %+v", res)
	}
	_, out = b.postJSON(t, "api/v1/pause", map[string]string{"priority": "urgent"}, b.c.token)
	check("error", json.RawMessage(out), "error")
}

func mustRaw(t *testing.T, m map[string]json.RawMessage) json.RawMessage {
	t.Helper()
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
