package keycount

import (
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestAddRespectsTheBound(t *testing.T) {
	c := New()
	if !c.Add("a", 2, 3) || c.Add("a", 2, 3) || !c.Add("a", 1, 3) {
		t.Fatalf("Add within 3: count %d, want 3 with the middle add refused", c.Get("a"))
	}
	if !c.Add("a", 5, 0) || c.Get("a") != 8 {
		t.Fatalf("Add unbounded: count %d, want 8", c.Get("a"))
	}
	c.Sub("a", 8)
	if c.Get("a") != 0 {
		t.Fatalf("Sub to zero: count %d, want 0", c.Get("a"))
	}
}

func TestAddSomeTakesWhatFits(t *testing.T) {
	c := New()
	c.Add("k", 3, 0)
	if took, had := c.AddSome("k", 10, 5); took != 2 || had != 3 {
		t.Fatalf("AddSome(10, max 5) from 3 = %d, %d; want 2, 3", took, had)
	}
	if took, had := c.AddSome("k", 1, 5); took != 0 || had != 5 {
		t.Fatalf("AddSome on a full key = %d, %d; want 0, 5", took, had)
	}
}

func TestZeroKeysAreDeleted(t *testing.T) {
	c := New()
	for _, k := range []string{"a", "b", "c", "d"} {
		c.Add(k, 1, 0)
		c.Sub(k, 1)
	}
	if n := c.Keys(); n != 0 {
		t.Fatalf("Keys() = %d after every count went back to zero, want 0", n)
	}
}

func TestConcurrentAddsStayWithinTheBound(t *testing.T) {
	c := New()
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if c.Add("hot", 1, 50) {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if ok != 50 || c.Get("hot") != 50 {
		t.Fatalf("%d adds succeeded, count %d; want 50 and 50", ok, c.Get("hot"))
	}
}
