package storekit_test

import (
	"context"
	"strings"
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

// TestMemoryStoreIdentity: each MemoryStore has an identity of its own, the same at
// every call.
func TestMemoryStoreIdentity(t *testing.T) {
	a, b := storekit.NewMemoryStore(), storekit.NewMemoryStore()
	ia, err := a.Identity(context.Background())
	if err != nil || !strings.HasPrefix(ia, "memory:") {
		t.Fatalf("Identity() = %q, %v; want memory:…", ia, err)
	}
	if again, _ := a.Identity(context.Background()); again != ia {
		t.Errorf("Identity() = %q, then %q; want the same", ia, again)
	}
	if ib, _ := b.Identity(context.Background()); ib == ia {
		t.Errorf("two MemoryStores have the identity %q", ia)
	}
}
