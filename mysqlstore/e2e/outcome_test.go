package e2e

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestSubmitOutcome submits a pool task on a kernel whose store reaches the server
// through a proxy that fails one commit, while a second kernel on the same table claims
// pool tasks. When the proxy forwards the COMMIT and loses its answer (then refuses
// connections, so that the store's retries fail too), the submit must return
// store.ErrOutcomeUnknown, not ErrStoreUnavailable, and the task, which is stored, must
// run exactly once. When the proxy cuts the connection before the INSERT reaches the
// server, the task must never be stored, so never run; the submit fails with
// ErrOutcomeUnknown, not ErrStoreUnavailable: the kernel sends the insert through
// InsertAs, one query with its COMMIT, and a client that lost the connection after
// sending it cannot tell whether the server got it.
func TestSubmitOutcome(t *testing.T) {
	for _, tt := range []struct {
		name   string
		act    proxyAction
		want   error
		other  error
		stored bool
	}{
		{"commit answer lost", proxyDropCommit, store.ErrOutcomeUnknown, store.ErrStoreUnavailable, true},
		{"cut before commit", proxyCut, store.ErrOutcomeUnknown, store.ErrStoreUnavailable, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t)
			table := ownTable(t, db, "outcome")
			direct, proxied, p := proxyStores(t, table, mysqlstore.Options{Retention: -1})
			runs := newRunCounter()
			ran := make(chan struct{}, 16)
			fn := func(ctx context.Context, pl []byte) error {
				err := runs.run(ctx, pl)
				ran <- struct{}{}
				return err
			}
			newKernel := func(s *mysqlstore.Store, owner string) *kernel.Kernel {
				k, err := kernel.New(kernel.Config{Store: s, Owner: owner, StoreTimeout: 5 * time.Second})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = k.Close() })
				if err := k.Register("outcome", fn); err != nil {
					t.Fatal(err)
				}
				return k
			}
			submitter := newKernel(proxied, "submitter")
			runner := newKernel(direct, "runner")

			payload := "outcome-" + tt.name
			p.setRule(queryHas(tt.act, fmt.Sprintf("%x", payload)))
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			h, err := submitter.SubmitDurable(ctx, kernel.DurableTask{Kind: "outcome", Payload: []byte(payload), Pool: true})
			if !errors.Is(err, tt.want) || errors.Is(err, tt.other) || h != nil {
				t.Fatalf("SubmitDurable() = handle %v, %v; want no handle and an error wrapping %v, not %v", h != nil, err, tt.want, tt.other)
			}
			p.setDown(false)

			count := func() int {
				var n int
				if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"` WHERE payload = ?", payload).Scan(&n); err != nil {
					t.Fatal(err)
				}
				return n
			}
			if tt.stored {
				select {
				case <-ran:
				case <-ctx.Done():
					var state, owner, attempt int
					err := db.QueryRow("SELECT state, owner, attempt FROM `"+table+"` WHERE payload = ?", payload).Scan(&state, &owner, &attempt)
					t.Fatalf("the task of a submit whose outcome was unknown never ran; its row: state %d, owner %d, attempt %d (%v)", state, owner, attempt, err)
				}
			} else if n := count(); n != 0 {
				t.Fatalf("%d rows stored for a submit that returned %v", n, err)
			}
			// A task submitted afterwards runs: the pool is served again.
			if _, err := runner.SubmitDurable(ctx, kernel.DurableTask{Kind: "outcome", Payload: []byte("after"), Pool: true}); err != nil {
				t.Fatal(err)
			}
			pollUntil(t, "the task submitted after the fault to run", 10*time.Millisecond, 30*time.Second, func() (bool, error) {
				return runs.count("after") == 1, nil
			})
			for _, k := range []*kernel.Kernel{submitter, runner} {
				sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
				err := k.Shutdown(sctx)
				scancel()
				if err != nil {
					t.Fatal(err)
				}
			}
			want := 0
			if tt.stored {
				want = 1
			}
			if got := runs.count(payload); got != want {
				t.Errorf("task of the failed submit ran %d times, want %d", got, want)
			}
			if n := count(); n != want {
				t.Errorf("%d rows stored for the failed submit, want %d", n, want)
			}
		})
	}
}
