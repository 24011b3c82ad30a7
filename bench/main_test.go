package bench

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain doubles as the child of Run's fresh-process repetitions: run with
// ChildArg, the test binary serves one job instead of testing.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == ChildArg {
		if err := ServeChild(context.Background(), NewRegistry(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
