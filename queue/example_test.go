package queue_test

import (
	"errors"
	"fmt"
	"strings"

	"github.com/axsched/ax/queue"
)

func ExampleRing() {
	r, err := queue.NewRing[string](3)
	if err != nil {
		panic(err)
	}
	for _, s := range []string{"a", "b", "c", "d"} {
		if err := r.Push(s); errors.Is(err, queue.ErrFull) {
			fmt.Println("full, dropped", s)
		}
	}
	removed, _ := r.Remove(func(s string) bool { return s == "b" })
	newest, _ := r.PopBack()
	oldest, _ := r.Pop()
	fmt.Println(removed, newest, oldest, r.Len())
	// Output:
	// full, dropped d
	// b c a 0
}

func ExampleBuckets() {
	b, err := queue.NewBuckets[string](
		[queue.NumLevels]int{8, 8, 8},
		queue.Quotas{High: 3, Normal: 2, LowGuaranteed: 1},
	)
	if err != nil {
		panic(err)
	}
	for i := range 4 {
		_ = b.Push(queue.High, fmt.Sprint("h", i))
		_ = b.Push(queue.Normal, fmt.Sprint("n", i))
		_ = b.Push(queue.Low, fmt.Sprint("l", i))
	}
	// One cycle of 3+2+1 picks — Low's and Normal's floors spread over it, High
	// taking the rest — then the next cycle begins.
	var picks []string
	for range 8 {
		v, _, _ := b.Pop(queue.AllLevels)
		picks = append(picks, v)
	}
	fmt.Println(strings.Join(picks, " "))

	// Only Normal may be dispatched now.
	v, from, ok := b.Pop(queue.MaskOf(queue.Normal))
	fmt.Println(v, from, ok)
	// Normal is empty, so a Normal-only pop finds nothing.
	_, _, ok = b.Pop(queue.MaskOf(queue.Normal))
	fmt.Println(ok, b.Len())
	// Output:
	// l0 n0 h0 n1 h1 h2 l1 n2
	// n3 normal true
	// false 3
}

func ExampleBuckets_SetAged() {
	type task struct {
		name   string
		waited int // how long the task has waited, in some unit
	}
	b, err := queue.NewBuckets[task](
		[queue.NumLevels]int{8, 8, 8},
		queue.Quotas{High: 1, Normal: 1, LowGuaranteed: 1},
	)
	if err != nil {
		panic(err)
	}
	b.SetAged(func(_ queue.Level, head task) bool { return head.waited > 100 })
	_ = b.Push(queue.High, task{"urgent", 1})
	_ = b.Push(queue.Normal, task{"email", 2})
	_ = b.Push(queue.Normal, task{"report", 500})

	// Normal's floor takes the first pick; then the aged Normal task takes High's.
	// Pop still says where each came from.
	for range 3 {
		t, from, _ := b.Pop(queue.AllLevels)
		fmt.Println(t.name, from)
	}
	// Output:
	// email normal
	// report normal
	// urgent high
}

func ExampleQuotas_Validate() {
	err := queue.Quotas{High: 0, Normal: 10, LowGuaranteed: -1}.Validate()
	fmt.Println(err)
	var qe *queue.QuotaError
	if errors.As(err, &qe) {
		fmt.Println("first bad field:", qe.Field)
	}
	// Output:
	// queue: Quotas.High = 0: must be >= 1
	// queue: Quotas.LowGuaranteed = -1: must be >= 1
	// first bad field: High
}
