package main

// The quick start prints what its tasks did, and leaves no goroutine behind.
func Example() {
	main()
	// Output:
	// running high attempt 1
	// <nil> succeeded
	// [ALPHA BETA] <nil>
	// <nil>
}
