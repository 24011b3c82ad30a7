//go:build !axdflow

package bench

import "errors"

// newDurableFlowTarget is ax's durable flows (package flow's Register), built
// with the tag axdflow.
func newDurableFlowTarget(*DurableSetup, Params) (flowTarget, error) {
	return nil, errors.New("ax's durable flows are not built in (go build -tags axdflow)")
}
