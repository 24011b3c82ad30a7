package console

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// replicaBundle is a kernel named owner on st with a console of its own.
func replicaBundle(t *testing.T, st store.Store, owner string) *bundle {
	t.Helper()
	k, err := kernel.New(kernel.Config{Store: st, Owner: owner, MaxConcurrency: 4, Lease: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Kernel: k, Store: st, Interval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c := h.(*console)
	t.Cleanup(func() {
		_ = k.Close()
		<-c.sm.done
	})
	return &bundle{k: k, h: h, c: c}
}

// TestReplicasEachConsoleShowsAll: two kernels on one store each publish their
// figures, and each one's console lists both, itself marked, with their queues.
func TestReplicasEachConsoleShowsAll(t *testing.T) {
	st := storekit.NewMemoryStore()
	a, b := replicaBundle(t, st, "replica-a"), replicaBundle(t, st, "replica-b")
	release := make(chan struct{})
	defer close(release)
	for range 3 {
		if _, err := a.k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { <-release; return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	// Wait for a publication of a's that shows its running tasks (every 200 ms at
	// a lease of 1 s).
	axtest.Eventually(t, func() bool {
		var d replicasData
		_ = json.Unmarshal([]byte(serve(t, b, "/api/v1/replicas")), &d)
		for _, r := range d.Replicas {
			if r.Owner == "replica-a" && r.Priorities[2].Running == 3 {
				return true
			}
		}
		return false
	}, "b's console showing a's three Low tasks running")
	for _, self := range []*bundle{a, b} {
		var d replicasData
		if err := json.Unmarshal([]byte(serve(t, self, "/api/v1/replicas")), &d); err != nil {
			t.Fatal(err)
		}
		if !d.Store || len(d.Replicas) != 2 || d.Error != "" {
			t.Fatalf("replicas = %+v, want both kernels", d)
		}
		me := self.k.Stats().Store.Owner
		for _, r := range d.Replicas {
			if r.Self != (r.Owner == me) || r.Published.IsZero() || !strings.HasPrefix(r.Version, "ax ") ||
				r.LeaseLeftMS <= 0 || r.LeaseMS != 1000 || r.LastHeartbeat.IsZero() || len(r.Priorities) != 3 {
				t.Errorf("replica %+v seen by %s: want published figures, a live lease, self only for %s", r, me, me)
			}
		}
		page := serve(t, self, "/")
		for _, want := range []string{`id="replicas"`, `data-owner="replica-a"`, `data-owner="replica-b"`, "(this one)"} {
			if !strings.Contains(page, want) {
				t.Errorf("%s's overview: no %q", me, want)
			}
		}
	}
}

// TestReplicasShapesAndHostile: api/v1/replicas has the documented shape; an
// owner name and a version that hold markup render as text and come back intact
// in JSON; a console without a ReplicaStore lists none.
func TestReplicasShapesAndHostile(t *testing.T) {
	st := storekit.NewMemoryStore()
	b := replicaBundle(t, st, "replica-a")
	const evilOwner, evilVersion = `"><img src=x onerror=alert(1)>`, "<script>alert(2)</script>\xff"
	o, err := st.Join(context.Background(), evilOwner, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	f := store.ReplicaFigures{
		Version: evilVersion, Queued: store.ByPriority[int]{High: 7}, RateSpan: time.Second,
		Rates: store.ByPriority[store.ReplicaRates]{Low: store.ReplicaRates{Submitted: 2.5}}, WaitP99: store.ByPriority[time.Duration]{Normal: 3 * time.Millisecond},
	}
	if err := st.PublishReplica(context.Background(), o, f); err != nil {
		t.Fatal(err)
	}
	raw := serve(t, b, "/api/v1/replicas")
	var m map[string]json.RawMessage
	_ = json.Unmarshal([]byte(raw), &m)
	if got := strings.Join(keysOf(t, json.RawMessage(raw)), " "); got != strings.Join(sortedFields("time store store_time replicas"), " ") {
		t.Errorf("replicas keys = %s", got)
	}
	var rs []json.RawMessage
	_ = json.Unmarshal(m["replicas"], &rs)
	if len(rs) != 2 {
		t.Fatalf("%d replicas, want 2: %s", len(rs), raw)
	}
	const replicaKeys = "owner epoch self lease_ms lease_left_ms last_heartbeat published age_ms version degraded zombies rate_span_s priorities sum"
	if got := strings.Join(keysOf(t, rs[1]), " "); got != strings.Join(sortedFields(replicaKeys), " ") {
		t.Errorf("replica keys = %s", got)
	}
	var r map[string]json.RawMessage
	_ = json.Unmarshal(rs[1], &r)
	const prioKeys = "priority queued running delayed totals rates wait_p50_ms wait_p99_ms"
	if got := strings.Join(keysOf(t, r["sum"]), " "); got != strings.Join(sortedFields(prioKeys), " ") {
		t.Errorf("replica priority keys = %s", got)
	}
	var d replicasData
	_ = json.Unmarshal([]byte(raw), &d)
	evil := d.Replicas[1]
	if evil.Owner != evilOwner || evil.Version != strings.ToValidUTF8(evilVersion, "\uFFFD") || evil.Priorities[0].Queued != 7 ||
		evil.Sum.Rates.Submitted != 2.5 || evil.Sum.WaitP99MS != 3 || evil.Self || d.Replicas[0].Self != true {
		t.Errorf("replica = %+v, want the published figures intact", evil)
	}
	page := serve(t, b, "/")
	if strings.Contains(page, "<img src=x") || strings.Contains(page, "<script>alert") {
		t.Errorf("the overview holds unescaped markup of a replica")
	}
	if !strings.Contains(page, "&lt;script&gt;alert(2)&lt;/script&gt;") {
		t.Errorf("the overview does not show the version as text")
	}

	plain := setup(t, Options{Interval: time.Minute})
	var none replicasData
	plain.getJSON(t, "api/v1/replicas", &none)
	if none.Store || none.Replicas == nil || len(none.Replicas) != 0 {
		t.Errorf("replicas without a store = %+v, want store false and an empty list", none)
	}
	if _, page := plain.get(t, ""); strings.Contains(page, `id="replicas"`) {
		t.Errorf("an overview without a store shows a replicas section")
	}
}

// TestOverviewNewFigures: the overview shows running and delayed tasks by
// priority, what is paused, degradation and the retry budget's use.
func TestOverviewNewFigures(t *testing.T) {
	b := setup(t, Options{Interval: time.Minute})
	if err := b.k.Pause(kernel.Selector{Priority: kernel.Low}); err != nil {
		t.Fatal(err)
	}
	if err := b.k.Pause(kernel.Selector{Group: "upstream", Key: "<b>k</b>"}); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	defer close(release)
	if _, err := b.k.TrySubmit(kernel.Task{Priority: kernel.High, Run: func(context.Context) error { <-release; return nil }}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.k.TrySubmit(kernel.Task{Priority: kernel.Normal, Delay: time.Hour, Run: func(context.Context) error { return nil }}); err != nil {
		t.Fatal(err)
	}
	axtest.Eventually(t, func() bool { st := b.k.Stats(); return st.Running == 1 && st.Delayed == 1 }, "one running, one delayed")
	b.c.sm.take() // a second sample: the charts
	var ov overviewData
	b.getJSON(t, "api/v1/overview", &ov)
	if ov.Priorities[0].Running != 1 || ov.Priorities[1].Delayed != 1 || ov.Degraded {
		t.Errorf("overview = %+v, want High running 1, Normal delayed 1, not degraded", ov.Priorities)
	}
	want := []pausedData{{Priority: "low"}, {Group: "upstream", Key: "<b>k</b>"}}
	if len(ov.Paused) != 2 || ov.Paused[0] != want[0] || ov.Paused[1] != want[1] {
		t.Errorf("paused = %+v, want %+v", ov.Paused, want)
	}
	_, page := b.get(t, "")
	for _, w := range []string{`id="paused"`, "priority low", "key upstream/&lt;b&gt;k&lt;/b&gt;", `id="degraded"`, `id="retry-budget"`, "Wait p99 over the last minute"} {
		if !strings.Contains(page, w) {
			t.Errorf("overview: no %q", w)
		}
	}
}
