package bench

// AxFactories returns the ax executors: ax (blocking Submit and Go) and ax-nb
// (TrySubmit and TryGo). It is empty until the kernel's submission API lands.
func AxFactories() []Factory { return nil }
