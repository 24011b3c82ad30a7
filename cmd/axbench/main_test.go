package main

import (
	"context"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/axsched/ax/bench"
)

// TestMain doubles as the child of the fresh-process repetitions: run with
// bench.ChildArg, the test binary serves one job instead of testing.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == bench.ChildArg {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	// ants starts its default pool (two goroutines) when it is imported.
	goleak.VerifyTestMain(m, goleak.IgnoreCurrent())
}
