package kernel_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storekit"
)

// TestPauseDurableKind: a paused kind's tasks stay queued, others run, and the
// kind's tasks run in their order once resumed.
func TestPauseDurableKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		k := newTestKernel(t, kernel.Config{MaxConcurrency: 1, Store: storekit.NewMemoryStore()})
		var mu sync.Mutex
		var order []string
		rec := func(_ context.Context, p []byte) error {
			mu.Lock()
			order = append(order, string(p))
			mu.Unlock()
			return nil
		}
		for _, kind := range []string{"mail", "sms"} {
			if err := k.Register(kind, rec); err != nil {
				t.Fatal(err)
			}
		}
		if err := k.Pause(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		var mail []*kernel.Handle
		for _, p := range []string{"m1", "m2", "m3"} {
			h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "mail", Payload: []byte(p)})
			if err != nil {
				t.Fatal(err)
			}
			mail = append(mail, h)
		}
		sms, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "sms", Payload: []byte("s1")})
		if err != nil {
			t.Fatal(err)
		}
		if err := sms.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		<-time.After(time.Second)
		synctest.Wait()
		for _, h := range mail {
			if s := h.State(); s != kernel.Queued {
				t.Fatalf("paused kind's task State() = %v, want queued", s)
			}
		}
		mail[1].Cancel()
		if err := k.Resume(kernel.Selector{Kind: "mail"}); err != nil {
			t.Fatal(err)
		}
		for _, h := range mail {
			<-h.Done()
		}
		mu.Lock()
		defer mu.Unlock()
		if got := len(order); got != 3 || order[0] != "s1" || order[1] != "m1" || order[2] != "m3" {
			t.Fatalf("order = %v, want [s1 m1 m3]", order)
		}
		if s := mail[1].State(); s != kernel.Canceled {
			t.Errorf("canceled paused task: State() = %v", s)
		}
	})
}
