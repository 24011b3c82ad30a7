package mysqlstore_test

import (
	"testing"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/kernel/storetest"
	"github.com/axsched/ax/mysqlstore"
)

func TestConformance(t *testing.T) {
	storetest.Exercise(t, func(t *testing.T) kernel.Store {
		s, _ := setup(t, mysqlstore.Options{})
		return s
	})
}
