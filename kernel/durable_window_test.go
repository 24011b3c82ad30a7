package kernel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"github.com/axsched/ax/store/storekit"
)

// TestDurableUniqueWindow: a durable task with a UniqueFor window holds its key after
// it succeeded: a duplicate submitted within the window is refused naming the first
// task; one submitted after it (the kernel's clock moved on) is accepted. The same for
// UniqueUntil. The bubble's clock is the kernel's: a mock clock inside a bubble can
// deadlock it (the mock sleeps while it holds its lock, so goroutines that wait for
// the lock are not durably blocked and the bubble's time never moves).
func TestDurableUniqueWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := storekit.NewMemoryStore()
		k := newTestKernel(t, kernel.Config{Store: s})
		if err := k.Register("job", func(context.Context, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, tc := range []struct {
			name string
			task kernel.DurableTask
		}{
			{"for", kernel.DurableTask{Kind: "job", UniqueKey: "hourly-for", UniqueFor: time.Hour}},
			{"until", kernel.DurableTask{Kind: "job", UniqueKey: "hourly-until", UniqueUntil: time.Now().Add(time.Hour)}},
		} {
			h1, err := k.SubmitDurable(ctx, tc.task)
			if err != nil {
				t.Fatalf("%s: first SubmitDurable() = %v", tc.name, err)
			}
			if err := h1.Wait(ctx); err != nil {
				t.Fatalf("%s: first task: %v", tc.name, err)
			}
			synctest.Wait() // its end is committed
			_, err = k.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", UniqueKey: tc.task.UniqueKey})
			var dk *store.DuplicateKeyError
			if !errors.Is(err, store.ErrDuplicateKey) || !errors.As(err, &dk) || dk.Holder != h1.ID() {
				t.Fatalf("%s: SubmitDurable() within the window = %v, want a DuplicateKeyError naming %s", tc.name, err, h1.ID())
			}
		}
		time.Sleep(time.Hour + time.Millisecond) // the bubble's clock moves on
		for _, key := range []string{"hourly-for", "hourly-until"} {
			h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "job", UniqueKey: key})
			if err != nil {
				t.Fatalf("SubmitDurable(%s) after the window = %v", key, err)
			}
			axtest.WaitOrTimeout(t, h.Done(), "the task after the window")
		}
	})
}

func TestDurableUniqueWindowBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{Store: storekit.NewMemoryStore()})
		_ = k.Register("job", func(context.Context, []byte) error { return nil })
		for _, tc := range []struct {
			task  kernel.DurableTask
			field string
		}{
			{kernel.DurableTask{Kind: "job", UniqueKey: "k", UniqueFor: -time.Second}, "DurableTask.UniqueFor"},
			{kernel.DurableTask{Kind: "job", UniqueFor: time.Second}, "DurableTask.UniqueKey"},
			{kernel.DurableTask{Kind: "job", UniqueUntil: time.Now()}, "DurableTask.UniqueKey"},
		} {
			_, err := k.SubmitDurable(context.Background(), tc.task)
			var ce *kernel.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field {
				t.Errorf("SubmitDurable(%+v) = %v, want a *ConfigError for %s", tc.task, err, tc.field)
			}
		}
	})
}

// TestDurableUniqueKeyNamesHolder: a duplicate of a live task's key, refused by the
// kernel before any write, names the holder, in one submit and in a batch.
func TestDurableUniqueKeyNamesHolder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{Store: storekit.NewMemoryStore()})
		g := make(gate)
		_ = k.Register("wait", func(ctx context.Context, _ []byte) error { return g.run(ctx) })
		ctx := context.Background()
		h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: "wait", UniqueKey: "order-7"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = k.SubmitDurable(ctx, kernel.DurableTask{Kind: "wait", UniqueKey: "order-7"})
		var dk *store.DuplicateKeyError
		if !errors.As(err, &dk) || dk.Holder != h.ID() || dk.Key != "order-7" {
			t.Fatalf("SubmitDurable(live key) = %v, want a DuplicateKeyError naming %s", err, h.ID())
		}
		hs, err := k.SubmitDurableMany(ctx, []kernel.DurableTask{{Kind: "wait", UniqueKey: "b"}, {Kind: "wait", UniqueKey: "b"}})
		if !errors.As(err, &dk) || hs[0] == nil || dk.Holder != hs[0].ID() {
			t.Fatalf("SubmitDurableMany(same key twice) = %v, want a DuplicateKeyError naming the first", err)
		}
		g.open()
	})
}
