package chunk

import (
	"container/heap"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestQueueKeepsOrderAcrossChunks(t *testing.T) {
	var q Queue[int]
	const n = 2*Len + 7
	for i := range n {
		e := q.Slot()
		e.V, e.Due = i, int64(n-i) // later values due sooner
		q.Commit(e.Due)
	}
	if q.Len() != n {
		t.Fatalf("Len() = %d, want %d", q.Len(), n)
	}
	c := q.Take()
	if q.Len() != 0 || q.Take() != nil {
		t.Fatalf("after Take: Len() = %d, want an empty queue", q.Len())
	}
	i, chunks := 0, 0
	for ; c != nil; c = c.Next {
		chunks++
		for _, e := range c.E[:c.N] {
			if e.V != i || e.Due != int64(n-i) {
				t.Fatalf("entry %d = %+v, want V %d Due %d", i, e, i, n-i)
			}
			i++
		}
		if want := int64(n - (i - 1)); c.MinDue != want {
			t.Fatalf("chunk %d: MinDue = %d, want %d (its last entry's)", chunks, c.MinDue, want)
		}
	}
	if i != n || chunks != 3 {
		t.Fatalf("took %d values in %d chunks, want %d in 3", i, chunks, n)
	}
}

func TestRecycleReusesUpToKept(t *testing.T) {
	var q Queue[int]
	for range (Kept + 3) * Len {
		q.Slot()
		q.Commit(0)
	}
	first := q.Take()
	taken := map[*Chunk[int]]bool{}
	for c := first; c != nil; c = c.Next {
		c.N = 0
		taken[c] = true
	}
	q.Recycle(first)
	if q.nfree != Kept {
		t.Fatalf("kept %d free chunks, want %d", q.nfree, Kept)
	}
	q.Slot()
	q.Commit(5)
	if !taken[q.tail] || q.nfree != Kept-1 {
		t.Fatalf("the next chunk was not a reused one (nfree %d)", q.nfree)
	}
}

func TestHeapOrdersByMinDue(t *testing.T) {
	var h Heap[int]
	for _, d := range []int64{5, 1, 4, 2, 3} {
		heap.Push(&h, &Chunk[int]{MinDue: d})
	}
	for want := int64(1); want <= 5; want++ {
		if c := heap.Pop(&h).(*Chunk[int]); c.MinDue != want {
			t.Fatalf("Pop() MinDue = %d, want %d", c.MinDue, want)
		}
	}
}
