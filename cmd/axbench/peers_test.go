package main

import (
	"testing"

	"github.com/axsched/ax/bench/benchtest"
)

func TestPeersRunEveryAcceptedTask(t *testing.T) {
	for _, f := range peers() {
		t.Run(f.Name, func(t *testing.T) { benchtest.Exercise(t, f) })
	}
}

func TestRegistryHasEveryExecutor(t *testing.T) {
	reg, err := registry()
	if err != nil {
		t.Fatalf("registry() error = %v", err)
	}
	for _, name := range []string{"go", "errgroup", "semaphore", "chanpool", "chanpool-nb", "priopool", "priopool-nb", "ants", "ants-nb", "pond", "pond-nb", "conc", "workerpool", "ax-memstore", "ax-mariadb-ack", "ax-mariadb-snapshot", "river-pg", "asynq-redis"} {
		if _, ok := reg.Executor(name); !ok {
			t.Errorf("registry has no executor %q", name)
		}
	}
}
