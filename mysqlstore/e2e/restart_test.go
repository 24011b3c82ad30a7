package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/internal/axtest"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestServerStopStart stops the database server (a private mariadbd) under a running
// kernel and starts it again on the same data directory. While it is down, durable
// submits fail fast with ErrStoreUnavailable and Stats().Store.Down is set; once it is
// back, submits succeed again, and every acknowledged task — those submitted before
// the stop, some due during it, and those after — runs once and is stored Succeeded.
// The DSN carries a password, which no error and no log line may show.
func TestServerStopStart(t *testing.T) {
	t.Parallel()
	const (
		secret       = "secret"
		storeTimeout = 3 * time.Second
		fastMax      = storeTimeout / 10 // "fast": a submit refused while the store is down
		kind         = "e2e.restart"
		before       = 200
		during       = 20
		after        = 200
	)
	srv := startPrivateServer(t)
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []error // every error the store and the kernel returned
	keep := func(err error) error {
		if err != nil {
			errs = append(errs, err)
		}
		return err
	}

	dsn := fmt.Sprintf("root:%s@tcp(127.0.0.1:%d)/test?timeout=1s", secret, srv.port)
	s, err := mysqlstore.Open(dsn, mysqlstore.Options{Table: "tasks", Retention: -1, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: s, StoreTimeout: storeTimeout, Logger: logger, Owner: "e2e-restart"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	runs := newRunCounter()
	if err := k.Register(kind, runs.run); err != nil {
		t.Fatal(err)
	}
	acked := map[string]*kernel.Handle{}
	refused := map[string]bool{}
	seq := 0
	submit := func(delay time.Duration) error {
		seq++
		p := fmt.Sprintf("t%04d", seq)
		h, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: kind, Payload: []byte(p), Delay: delay})
		if keep(err) != nil {
			refused[p] = true
			return err
		}
		acked[p] = h
		return nil
	}

	// Up: half the tasks run now, half are due in 2.5–4.5 s, while the server will be
	// down or once it is back. The journal is idle at the stop, so that the first
	// submit's own commit finds the server gone.
	var now []*kernel.Handle
	for i := range before {
		var delay time.Duration
		if i%2 == 0 {
			delay = 2500*time.Millisecond + time.Duration(i)*10*time.Millisecond
		}
		if err := submit(delay); err != nil {
			t.Fatalf("submit before the stop = %v", err)
		}
		if delay == 0 {
			now = append(now, acked[fmt.Sprintf("t%04d", seq)])
		}
	}
	for _, h := range now {
		if err := h.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	axtest.Eventually(t, func() bool { return k.Stats().Store.Pending == 0 }, "the journal to be idle")

	srv.stop(t)
	var first, slowest time.Duration
	for i := range during {
		t0 := time.Now()
		err := submit(0)
		took := time.Since(t0)
		slowest = max(slowest, took)
		if i == 0 {
			first = took
		}
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Fatalf("submit %d while the server is down = %v, want an error wrapping ErrStoreUnavailable", i, err)
		}
		if took > fastMax {
			t.Errorf("submit %d while the server is down took %v, want at most %v (StoreTimeout %v)", i, took, fastMax, storeTimeout)
		}
		if !k.Stats().Store.Down {
			t.Errorf("Stats().Store.Down = false after submit %d failed", i)
		}
	}

	srv.start(t)
	t0 := time.Now()
	pollUntil(t, "a durable submit to succeed after the restart", 10*time.Millisecond, 30*time.Second, func() (bool, error) {
		err := submit(0)
		if err != nil && !errors.Is(err, store.ErrStoreUnavailable) && !errors.Is(err, store.ErrOutcomeUnknown) {
			return false, err
		}
		return err == nil, nil
	})
	recovery := time.Since(t0)
	for range after {
		if err := submit(0); err != nil {
			t.Fatalf("submit after the restart = %v", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for p, h := range acked {
		if err := h.Wait(ctx); err != nil {
			t.Fatalf("acknowledged task %s ended with %v", p, err)
		}
	}
	if err := keep(k.Shutdown(ctx)); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	st := k.Stats().Store
	t.Logf("%d acknowledged, %d refused while down (the first in %v, the slowest in %v); submits back %v after the restart; %d commits failed",
		len(acked), len(refused), first.Round(time.Microsecond), slowest.Round(time.Microsecond), recovery.Round(time.Millisecond), st.Errors)
	if st.Down || st.Refused != 0 {
		t.Errorf("Stats().Store = %+v after the restart, want up and no refused change", st)
	}

	for p, h := range acked {
		got, err := s.Get(ctx, h.ID())
		if err != nil || got.State != store.Succeeded || got.Attempt != 1 || runs.count(p) != 1 {
			t.Errorf("task %s: stored %v attempt %d (%v), ran %d times; want Succeeded once", p, got.State, got.Attempt, err, runs.count(p))
		}
	}
	for p := range refused {
		if n := runs.count(p); n != 0 {
			t.Errorf("task %s ran %d times though its submit failed", p, n)
		}
	}
	if live, err := s.Recover(ctx); err != nil || len(live) != 0 {
		t.Errorf("Recover() = %d live tasks, %v; want none", len(live), err)
	}

	// The password appears nowhere; the logs tell the outage.
	for _, err := range errs {
		noSecret(t, "an error", err.Error(), secret)
	}
	out := logs.String()
	noSecret(t, "the logs", out, secret)
	for _, want := range []string{"the store is down", "the store answers again"} {
		if !strings.Contains(out, want) {
			t.Errorf("logs lack %q:\n%s", want, tail(out, 4000))
		}
	}
}
