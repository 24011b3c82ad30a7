package storekit_test

import (
	"testing"

	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
	"github.com/axsched/ax/store/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) store.Store {
		s := storekit.NewMemoryStore()
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
