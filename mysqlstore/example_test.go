package mysqlstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// A kernel with a MySQL/MariaDB store runs durable tasks: SubmitDurable returns once
// the task is committed, and a kernel started later on the same table runs what a
// crashed process left. The README shows this body; it needs a database, so it is
// compiled but not run.
func Example() {
	ctx := context.Background()
	store, err := mysqlstore.Open(os.Getenv("AX_MYSQL_DSN"), mysqlstore.Options{Table: "ax_tasks"})
	if err != nil {
		panic(err)
	}
	defer func() { _ = store.Close() }()
	if err := store.Migrate(ctx); err != nil { // CREATE TABLE IF NOT EXISTS
		panic(err)
	}

	k, err := kernel.New(kernel.Config{
		Store: store,
		Owner: "mailer-0", // stable across restarts: this kernel's unfinished tasks resume at once
	})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Shutdown(ctx) }() // unfinished durable tasks stay in the table

	// A closure cannot be stored: durable tasks name a registered kind and carry bytes.
	if err := k.Register("email.send", func(ctx context.Context, payload []byte) error {
		fmt.Printf("sending %s\n", payload)
		return nil
	}); err != nil {
		panic(err)
	}
	h, err := k.SubmitDurable(ctx, kernel.DurableTask{
		Kind:        "email.send",
		Payload:     []byte(`{"to":"ada@example.com"}`),
		UniqueKey:   "welcome-ada", // a second live task with this key is refused
		MaxAttempts: 5,             // across restarts
	})
	if err != nil {
		panic(err) // refused: ErrDuplicateKey, ErrPayloadTooLarge, ErrStoreUnavailable...
	}
	// Committed: a crash from here on does not lose the task.
	_ = h.Wait(ctx)

	// Tasks that used up their attempts are dead letters, kept until requeued or purged.
	dead, err := store.DeadLetters(ctx, 100, "")
	if err != nil {
		panic(err)
	}
	for _, t := range dead {
		if _, err := k.Requeue(ctx, t.ID); err != nil {
			panic(err)
		}
	}
}

// SubmitTx inserts a durable task in the caller's transaction, beside the row it is
// about: a rollback leaves neither, a commit both, and any kernel on the table runs
// the task. It needs a database, so it is compiled but not run.
func ExampleStore_SubmitTx() {
	ctx := context.Background()
	store, err := mysqlstore.Open(os.Getenv("AX_MYSQL_DSN"), mysqlstore.Options{Table: "ax_tasks"})
	if err != nil {
		panic(err)
	}
	defer func() { _ = store.Close() }()

	tx, err := store.DB().BeginTx(ctx, nil) // or a transaction of the application's own *sql.DB
	if err != nil {
		panic(err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer) VALUES (?, ?)", 42, "ada"); err != nil {
		panic(err)
	}
	ids, err := store.SubmitTx(ctx, tx, mysqlstore.TxTask{
		Kind:      "email.order-confirmation",
		Payload:   []byte(`{"order":42}`),
		UniqueKey: "order-confirmation/42", // a second one is refused: *store.DuplicateKeyError
	})
	if err != nil {
		panic(err) // nothing of the call is in tx; tx is still open
	}
	if err := tx.Commit(); err != nil {
		panic(err)
	}
	store.Notify() // this process's kernels claim at once; the others within their poll

	t, err := store.Get(ctx, ids[0]) // follow the task by its ID
	if err != nil {
		panic(err)
	}
	fmt.Println(t.State)
}
