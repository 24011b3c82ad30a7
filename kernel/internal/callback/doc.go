// Package callback runs user callbacks off the kernel's goroutines: a [Queue]
// delivers values in order to one callback on a goroutine of its own, a [Pool] runs
// functions on a few workers. Both recover panics, survive runtime.Goexit, and stop
// within a deadline, reporting what they had to abandon.
package callback
