// Package b is imported by package a.
package b

// B is a type of package b.
type B struct{}

// Run is a method of B.
func (B) Run() {}
