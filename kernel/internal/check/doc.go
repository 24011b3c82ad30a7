// Package check collects the errors of bad input, one per bad field, each naming
// the field, its value and the rule it breaks ("must be >= 0", "must be in [0,
// 1024]"). It holds the rules that recur across the kernel's configs and task
// fields (a bound, a range, a length in bytes); the kernel keeps the fields, their
// limits and the rules of its own, and makes each error ([Errs.New]: the kernel's
// *ConfigError), so callers see one error type whatever checked it. [Batch] holds
// the errors of a batch's items by index (a durable submit of many tasks).
//
// It knows no kernel type: the validation of Config, RetryPolicy, Limits,
// BreakerConfig, GroupConfig and DurableTask calls it directly, on the caller's
// goroutine.
package check
