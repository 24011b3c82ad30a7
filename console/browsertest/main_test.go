package browsertest

import (
	"flag"
	"testing"

	"go.uber.org/goleak"
)

var screenshots = flag.Bool("screenshots", false, "write a screenshot of each page into docs/console/ of the repository")

// run closes the shared browser after the tests, before goleak looks for
// goroutines left running.
type run struct{ m *testing.M }

func (r run) Run() int {
	code := r.m.Run()
	closeBrowser()
	return code
}

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(run{m})
}
