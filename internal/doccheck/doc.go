// Package doccheck keeps the Go code that README.md and docs/*.md show identical to
// code that is compiled and tested. It has no API: its test is the check.
//
// Every ```go block in those files follows a marker line naming its source:
//
//	<!-- code: examples/quickstart/main.go -->
//	<!-- code: kernel/guides_example_test.go Example_retries -->
//
// The first form shows a whole file; the second the body of a function, one tab
// less indented, without its "// Output:" comment. A block without a marker, or one
// that differs from its source, fails the test. After changing the source, rewrite
// the blocks with
//
//	go test ./internal/doccheck -update
package doccheck
