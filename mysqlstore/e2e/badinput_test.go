package e2e

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
	"github.com/axsched/ax/store"
)

// TestPasswordNeverShown opens stores on DSNs with a password that cannot connect (or
// do not parse) and runs a kernel on one: the password appears in no error of the
// store or the kernel and in no log line.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	const secret = "secret"
	logs := &lockedBuffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	for _, dsn := range []string{
		"user:secret@tcp(127.0.0.1:1)/x/y",       // a database name with a slash
		"user:secret@tcp(127.0.0.1:1/x",          // no closing parenthesis
		"user:secret@tcp(127.0.0.1:1)/x?loc=%zz", // a bad escape
		"user:secret@tcp(127.0.0.1:1)/x?timeout=never",
	} {
		s, err := mysqlstore.Open(dsn, mysqlstore.Options{Logger: logger})
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%q) succeeded, want a parse error", strings.ReplaceAll(dsn, secret, "…"))
			continue
		}
		noSecret(t, "Open's error", err.Error(), secret)
	}

	s, err := mysqlstore.Open("user:secret@tcp(127.0.0.1:1)/x", mysqlstore.Options{Table: "tasks", Retention: -1, Logger: logger})
	if err != nil {
		t.Fatalf("Open() = %v, want a lazy store", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var errs []error
	errs = append(errs, s.Migrate(ctx))
	_, err = s.Commit(ctx, []store.Change{{Op: store.OpInsert, Task: store.StoredTask{
		ID: "a", Kind: "k", State: store.Queued, Fence: 1, CreatedAt: time.Now(), UpdatedAt: time.Now(),
	}}})
	errs = append(errs, err)
	_, err = s.Get(ctx, "a")
	errs = append(errs, err)
	_, err = s.Recover(ctx)
	errs = append(errs, err)
	k, err := kernel.New(kernel.Config{Store: s, StoreTimeout: 2 * time.Second, Logger: logger})
	if err == nil {
		_ = k.Close()
		t.Fatal("kernel.New on a store that cannot connect succeeded")
	}
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, store.ErrStoreUnavailable) {
			t.Errorf("call %d = %v, want an error wrapping ErrStoreUnavailable", i, err)
			continue
		}
		noSecret(t, "an error", err.Error(), secret)
	}
	if err := s.Close(); err != nil {
		noSecret(t, "Close's error", err.Error(), secret)
	}
	noSecret(t, "the logs", logs.String(), secret)
}

// TestPayloadTooLargeEndToEnd submits payloads over the store's cap: each is refused
// with ErrPayloadTooLarge and writes no row, alone or beside a payload that fits.
func TestPayloadTooLargeEndToEnd(t *testing.T) {
	t.Parallel()
	const (
		capBytes = 1024
		kind     = "e2e.payload"
	)
	db := openDB(t)
	table := ownTable(t, db, "payload")
	s, err := mysqlstore.New(db, mysqlstore.Options{Table: table, MaxPayload: capBytes, Retention: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	k, err := kernel.New(kernel.Config{Store: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	runs := newRunCounter()
	if err := k.Register(kind, runs.run); err != nil {
		t.Fatal(err)
	}
	rows := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+table+"`").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	for _, size := range []int{capBytes + 1, 4 * capBytes, 2 << 20} {
		h, err := k.SubmitDurable(ctx, kernel.DurableTask{Kind: kind, Payload: make([]byte, size)})
		if !errors.Is(err, store.ErrPayloadTooLarge) || h != nil {
			t.Errorf("SubmitDurable(%d bytes) = %v, %v; want ErrPayloadTooLarge", size, h, err)
		}
	}
	if n := rows(); n != 0 {
		t.Fatalf("%d rows after oversized submits, want 0", n)
	}

	fits := make([]byte, capBytes)
	copy(fits, "fits")
	hs, err := k.SubmitDurableMany(ctx, []kernel.DurableTask{
		{Kind: kind, Payload: make([]byte, capBytes+1)},
		{Kind: kind, Payload: fits},
	})
	if !errors.Is(err, store.ErrPayloadTooLarge) || !strings.Contains(err.Error(), "DurableTask[0]") || len(hs) != 2 || hs[0] != nil || hs[1] == nil {
		t.Fatalf("SubmitDurableMany(too large, fits) = %v, %v; want DurableTask[0] refused with ErrPayloadTooLarge", hs, err)
	}
	if err := hs[1].Wait(ctx); err != nil {
		t.Fatalf("the task that fits: %v", err)
	}
	if err := k.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if n := rows(); n != 1 {
		t.Errorf("%d rows, want 1: the task that fits", n)
	}
	if got, err := s.Get(ctx, hs[1].ID()); err != nil || got.State != store.Succeeded || len(got.Payload) != capBytes {
		t.Errorf("Get(the task that fits) = %v, %d bytes, %v; want Succeeded with its payload", got.State, len(got.Payload), err)
	}
	if n := runs.count(string(fits)); n != 1 {
		t.Errorf("the task that fits ran %d times, want 1", n)
	}
	if st := k.Stats().Store; st.Refused != 0 {
		t.Errorf("Stats().Store.Refused = %d, want 0", st.Refused)
	}
}
