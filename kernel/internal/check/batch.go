package check

import "strings"

// Batch is the errors of a batch's items by index, nil for an item accepted. Its
// message is those of the refused items, one a line (each error names its item),
// and Unwrap returns them.
type Batch struct{ Errs []error }

// Error returns the refused items' messages, one a line.
func (e *Batch) Error() string {
	var b strings.Builder
	for _, err := range e.Errs {
		if err == nil {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the errors of the refused items, in order.
func (e *Batch) Unwrap() []error {
	var out []error
	for _, err := range e.Errs {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
