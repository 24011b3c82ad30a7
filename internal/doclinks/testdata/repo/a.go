// Package a has doc links that resolve and links that do not. [T], [T.M], [T.F],
// [I.Do], [b.B], [b.B.Run], [b], [context.Context], [time.Duration.String] and
// [*T] resolve; [a.T] names this package. Brackets that are no link, such as
// [0, 1), occ[i] or [a b], are not checked.
package a

import (
	"context"

	"example.com/repo/b"
)

// T is a type. [T.Missing] is broken.
type T struct {
	// F is a field; [Nope] is broken.
	F int
	g int // g is unexported; [b.Missing] is broken.
}

// M is a method. [time.Nope] is broken. [strings.Builder] resolves (a standard
// package of one element), [sql.DB] does not: a does not import database/sql.
func (T) M() {}

// I is an interface.
type I interface {
	// Do does; [I.Undone] is broken.
	Do(ctx context.Context) b.B
}

// helper is unexported; its doc links are checked too. [helper] is not exported.
func helper() {}

// V uses helper.
var V = helper
