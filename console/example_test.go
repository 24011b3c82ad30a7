package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/axsched/ax/console"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/schedule"
)

// mount is the README's and docs/console.md's example: three lines mount the
// console on a mux.
func mount(mux *http.ServeMux, k *kernel.Kernel, s *schedule.Scheduler) {
	ui, err := console.New(console.Options{Kernel: k, Scheduler: s}) // read-only unless Actions: true
	if err != nil {
		panic(err)
	}
	mux.Handle("/console/", http.StripPrefix("/console", ui)) // pages and a JSON API: docs/console.md
}

// The console under /console/ of a mux, beside the kernel's metrics.
func Example() {
	k, err := kernel.New(kernel.Config{Groups: map[string]kernel.GroupConfig{"upstream": {}}})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Close() }()
	s, err := schedule.New(k, schedule.Config{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) { k.WritePrometheus(w) })
	mount(mux, k, s)

	for _, path := range []string{"/console/", "/console/api/v1/groups"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		fmt.Println(path, rec.Code, rec.Header().Get("Content-Type"))
	}
	// Output:
	// /console/ 200 text/html; charset=utf-8
	// /console/api/v1/groups 200 application/json; charset=utf-8
}
