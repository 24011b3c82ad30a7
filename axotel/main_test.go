package axotel_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if table := os.Getenv(childEnv); table != "" {
		child(table) // never returns: the parent kills the process
	}
	goleak.VerifyTestMain(m)
}
