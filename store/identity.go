package store

import "context"

// Identifier is implemented by a [SharedStore] that can name the data it keeps. The
// kernel reads the identity at kernel.New when Config.Owner is empty: kernels on stores
// of one identity on one host take default owner names from one set of slots, so that a
// process restarted on the same store takes back its predecessor's name (see
// kernel.Config.Owner). Without it, all the stores of a host share one set.
type Identifier interface {
	// Identity returns a string that is the same for every store value on the same
	// data, in any process of the host (the same tables of the same database server,
	// whatever the address it was reached by, where the store can tell), and differs
	// between stores on different data. It may reach the database, and returns an
	// error when it could not.
	Identity(ctx context.Context) (string, error)
}
