package storekit_test

import (
	"testing"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
	"github.com/axsched/ax/kernel/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) kernel.Store {
		s := storekit.NewMemoryStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
