package fifo

import (
	"math/rand/v2"
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestQueueModel drives a Queue and a plain slice with the same random operations
// and compares them after each.
func TestQueueModel(t *testing.T) {
	for seed := range uint64(50) {
		r := rand.New(rand.NewPCG(seed, 1))
		var q Queue[int]
		var model []int
		next := 0
		for op := range 2000 {
			switch x := r.IntN(10); {
			case x < 4:
				q.Push(next)
				model = append(model, next)
				next++
			case x < 5:
				q.PushFront(next)
				model = append([]int{next}, model...)
				next++
			case x < 8 && len(model) > 0:
				if got := q.Pop(); got != model[0] {
					t.Fatalf("seed %d op %d: Pop() = %d, want %d", seed, op, got, model[0])
				}
				model = model[1:]
			case x < 9 && len(model) > 0:
				v := model[r.IntN(len(model))]
				if !q.Remove(func(y int) bool { return y == v }) {
					t.Fatalf("seed %d op %d: Remove(%d) = false, want true", seed, op, v)
				}
				model = slices.DeleteFunc(model, func(y int) bool { return y == v })
			default:
				if q.Remove(func(y int) bool { return y == -1 }) {
					t.Fatalf("seed %d op %d: Remove of a value not queued = true", seed, op)
				}
			}
			if q.Len() != len(model) {
				t.Fatalf("seed %d op %d: Len() = %d, want %d", seed, op, q.Len(), len(model))
			}
			if len(model) > 0 && q.Peek() != model[0] {
				t.Fatalf("seed %d op %d: Peek() = %d, want %d", seed, op, q.Peek(), model[0])
			}
		}
	}
}
