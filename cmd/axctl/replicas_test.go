package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/console"
)

// replicasSample is GET api/v1/replicas as docs/console.md shows it.
const replicasSample = `{
  "time": "2026-12-05T10:47:24Z",
  "store": true,
  "store_time": "2026-12-05T10:47:24.120Z",
  "replicas": [
    {
      "owner": "api-1", "epoch": 3, "self": true,
      "lease_ms": 15000, "lease_left_ms": 13200, "last_heartbeat": "2026-12-05T10:47:22.320Z",
      "published": "2026-12-05T10:47:21.900Z", "age_ms": 2220, "version": "ax v0.2.0",
      "degraded": false, "zombies": 0, "rate_span_s": 3.0,
      "priorities": [],
      "sum": {"priority": "all", "queued": 30, "running": 4, "delayed": 3,
              "totals": {"submitted": 3100, "succeeded": 3010, "failed": 41, "timed_out": 5,
                         "retried": 52, "rejected": 0},
              "rates": {"submitted": 91.0, "succeeded": 88.3, "failed": 0.9, "timed_out": 0.2,
                        "retried": 1.4, "rejected": 0},
              "wait_p50_ms": 1.2, "wait_p99_ms": 40.9}
    },
    {
      "owner": "worker-<2>", "epoch": 5, "self": false,
      "lease_ms": 15000, "lease_left_ms": 9000, "last_heartbeat": "2026-12-05T10:47:18.000Z",
      "age_ms": 0, "version": "ax v0.2.0", "degraded": true, "zombies": 1, "rate_span_s": 0,
      "priorities": [], "sum": {"priority": "all"}
    }
  ]
}`

// TestReplicas reads the replicas of a console that serves api/v1/replicas (a
// handler answering the documented sample), and of one that does not.
func TestReplicas(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/console/api/v1/replicas" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(replicasSample))
	}))
	defer srv.Close()
	r := &runner{t: t, client: srv.Client(), env: map[string]string{"AXCTL_URL": srv.URL + "/console/"}}
	golden(t, "replicas", r.ok("replicas"))
	var v struct {
		Replicas []struct {
			Owner string `json:"owner"`
		} `json:"replicas"`
	}
	r.jsonOf(&v, "replicas")
	if len(v.Replicas) != 2 || v.Replicas[1].Owner != "worker-<2>" {
		t.Errorf("replicas --json = %+v; want the console's JSON", v)
	}

	// owners: the live replicas, their lease's end on the store's clock.
	var owners struct {
		Owners []ownerRow `json:"owners"`
	}
	r.jsonOf(&owners, "owners")
	if len(owners.Owners) != 2 || owners.Owners[0].Name != "api-1" || !owners.Owners[0].Live || owners.Owners[0].Tasks != nil ||
		owners.Owners[0].Expires.Format(time.RFC3339Nano) != "2026-12-05T10:47:37.32Z" {
		t.Errorf("owners --json on a console = %+v", owners.Owners)
	}
	golden(t, "owners_console", r.ok("owners"))

	// A console without a store that keeps replicas: a usage error naming the option.
	b := setupWeb(t, console.Options{})
	for _, cmd := range []string{"replicas", "owners"} {
		res := b.r.run(cmd)
		if res.code != exitUsage || !strings.Contains(res.stderr, "console.Options.Store") {
			t.Errorf("%s on a console without replicas = %d %q; want %d", cmd, res.code, res.stderr, exitUsage)
		}
	}
}
