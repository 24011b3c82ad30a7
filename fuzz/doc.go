// Package fuzz holds fuzz targets and reference models for ax's data structures.
//
// The models are deliberately naive (a slice for a ring, plain counters for the
// picker's cycles) so that they are obviously right; each fuzz target drives an ax
// structure and its model with the same operations, decoded from the fuzzer's bytes,
// and fails on the first difference. Crashers are kept under testdata/fuzz and run
// as regular tests by go test.
//
// Run one target with, for example:
//
//	go test -run '^$' -fuzz '^FuzzRing$' -fuzztime 20s ./fuzz/
package fuzz
