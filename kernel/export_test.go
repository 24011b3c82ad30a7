package kernel

// Names the external tests (package kernel_test) need from the package's
// unexported constants.
const (
	BatchFlushSize = batchFlushSize
)
