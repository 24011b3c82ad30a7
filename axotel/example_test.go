package axotel_test

import (
	"fmt"

	"github.com/axsched/ax/axotel"
	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// readme is the README's example: the lines that trace a kernel's tasks.
func readme(st store.Store) (*kernel.Kernel, error) {
	hooks := axotel.New(otel.GetTracerProvider(), propagation.TraceContext{})
	return kernel.New(kernel.Config{Store: st, Hooks: hooks}) // durable tasks: traced across restarts
}

// A kernel whose attempts are traced with the global TracerProvider.
func Example() {
	k, err := readme(nil)
	fmt.Println(err, k.Close())
	// Output: <nil> <nil>
}
