package mysqlstore_test

import (
	"context"
	"fmt"
	"os"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/mysqlstore"
)

// Replicas share one table: each kernel is an owner with a lease, a replica
// restarted under the same Owner takes its unfinished tasks back at once, and a
// pool task runs in whichever replica has a free slot. The README shows this body;
// it needs a database, so it is compiled but not run.
func Example_readme() {
	ctx := context.Background()
	store, err := mysqlstore.Open(os.Getenv("AX_MYSQL_DSN"), mysqlstore.Options{Table: "ax_tasks"})
	if err != nil {
		panic(err)
	}
	if err := store.Migrate(ctx); err != nil { // CREATE TABLE IF NOT EXISTS
		panic(err)
	}
	// One table for every replica; a stable Owner lets a restarted replica resume at once.
	k, err := kernel.New(kernel.Config{Store: store, Owner: os.Getenv("POD_NAME")})
	if err != nil {
		panic(err)
	}
	defer func() { _ = k.Shutdown(ctx) }() // unfinished durable tasks stay in the table
	if err := k.Register("email.send", sendEmail); err != nil {
		panic(err)
	}
	_, err = k.SubmitDurable(ctx, kernel.DurableTask{
		Kind:      "email.send", // a closure cannot be stored: a registered kind and bytes
		Payload:   []byte(`{"to":"ada@example.com"}`),
		UniqueKey: "welcome-ada", // a second live task with this key is refused
		Pool:      true,          // any replica with a free slot may run it
	})
	fmt.Println(err) // nil: committed, and no crash of any process loses it now
}

// sendEmail runs one attempt of an "email.send" task.
func sendEmail(ctx context.Context, payload []byte) error { return nil }
