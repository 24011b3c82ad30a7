package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// TestReplicasOnEachConsole runs two kernels on one table, each with a console
// on its own store value, and checks that each console's api/v1/replicas and
// overview list both kernels with the figures they published: the Low tasks one
// of them runs, its lease and its version.
func TestReplicasOnEachConsole(t *testing.T) {
	t.Parallel()
	db := openDB(t)
	table := ownTable(t, db, "replicas")
	type node struct {
		k   *kernel.Kernel
		srv *httptest.Server
	}
	start := func(owner string) node {
		s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, Retention: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		k, err := kernel.New(kernel.Config{Store: s, Owner: owner, Lease: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close() })
		h, err := console.New(console.Options{Kernel: k, Store: s, Interval: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return node{k: k, srv: srv}
	}
	a, b := start("replicas-a"), start("replicas-b")
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	for range 3 {
		if _, err := a.k.TrySubmit(kernel.Task{Priority: kernel.Low, Run: func(context.Context) error { <-release; return nil }}); err != nil {
			t.Fatal(err)
		}
	}
	type replica struct {
		Owner       string  `json:"owner"`
		Epoch       uint64  `json:"epoch"`
		Self        bool    `json:"self"`
		LeaseLeftMS float64 `json:"lease_left_ms"`
		AgeMS       float64 `json:"age_ms"`
		Version     string  `json:"version"`
		Priorities  []struct {
			Running int `json:"running"`
		} `json:"priorities"`
	}
	list := func(n node) (map[string]replica, error) {
		res, err := http.Get(n.srv.URL + "/api/v1/replicas")
		if err != nil {
			return nil, err
		}
		defer func() { _ = res.Body.Close() }()
		var d struct {
			Store    bool      `json:"store"`
			Error    string    `json:"error"`
			Replicas []replica `json:"replicas"`
		}
		if err := json.NewDecoder(res.Body).Decode(&d); err != nil {
			return nil, err
		}
		m := map[string]replica{}
		for _, r := range d.Replicas {
			m[r.Owner] = r
		}
		return m, nil
	}
	for _, n := range []node{a, b} {
		me := n.k.Stats().Store
		pollUntil(t, me.Owner+"'s console listing both kernels, a's three Low tasks running", 50*time.Millisecond, 15*time.Second, func() (bool, error) {
			m, err := list(n)
			if err != nil {
				return false, err
			}
			ra, rb := m["replicas-a"], m["replicas-b"]
			return len(m) == 2 && len(ra.Priorities) == 3 && ra.Priorities[2].Running == 3 && rb.Version != "", nil
		})
		m, _ := list(n)
		for _, r := range m {
			if r.Self != (r.Owner == me.Owner) || (r.Self && r.Epoch != me.Epoch) || r.LeaseLeftMS <= 0 || r.LeaseLeftMS > 1000 ||
				r.AgeMS < 0 || r.AgeMS > 5000 || r.Version == "" {
				t.Errorf("%s's console lists %+v: want a live lease of at most 1 s, figures under 5 s old, self only for itself", me.Owner, r)
			}
		}
		res, err := http.Get(n.srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{`data-owner="replicas-a"`, `data-owner="replicas-b"`} {
			if !strings.Contains(string(body), want) {
				t.Errorf("%s's overview: no %s", me.Owner, want)
			}
		}
	}
	// A kernel that closes leaves the store, and leaves the other's list.
	if err := b.k.Close(); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "a's console listing a only", 50*time.Millisecond, 15*time.Second, func() (bool, error) {
		m, err := list(a)
		_, hasB := m["replicas-b"]
		return len(m) == 1 && !hasB, err
	})
}
