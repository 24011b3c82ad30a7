// Package goid reads goroutine ids and stacks from the runtime's stack dumps.
package goid

import (
	"bytes"
	"runtime"
	"strconv"
)

// ID returns the current goroutine's id, parsed from its stack header. It costs
// a stack read: call it once per goroutine.
func ID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		id, _ := strconv.ParseUint(string(b[:i]), 10, 64)
		return id
	}
	return 0
}

// Stack returns the stack of goroutine gid, or nil if it is gone (or gid is 0).
func Stack(gid uint64) []byte {
	if gid == 0 {
		return nil
	}
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	head := []byte("goroutine " + strconv.FormatUint(gid, 10) + " [")
	i := bytes.Index(buf, head)
	if i < 0 {
		return nil
	}
	rest := buf[i:]
	if j := bytes.Index(rest, []byte("\n\n")); j >= 0 {
		rest = rest[:j]
	}
	return bytes.Clone(rest)
}
