package retries

import (
	"testing"
	"time"
)

func TestAllowRefusesPastTheFloorUntilTheWindowSlides(t *testing.T) {
	var b Budget
	b.SetConfig(Config{Ratio: 0.5, MinPerSecond: 1, Window: 2 * time.Second})
	now := time.Unix(1000, 0)
	b.FirstN(now, 2) // limit: 0.5×2 + 1×2 = 3
	for i := range 3 {
		if !b.Allow(now) {
			t.Fatalf("Allow() #%d = false, want true", i+1)
		}
	}
	if b.Allow(now) {
		t.Fatal("Allow() past the limit = true, want false")
	}
	at := b.Refill(now, now.Add(time.Millisecond))
	if want := time.Unix(1001, 0); !at.Equal(want) {
		t.Fatalf("Refill() = %v, want %v", at, want)
	}
	// One slot later the first attempts and retries still count (a 2 s window).
	if b.Allow(at) {
		t.Fatal("Allow() a slot later = true, want false (the window still holds them)")
	}
	// Past the window they no longer do.
	if !b.Allow(now.Add(2 * time.Second)) {
		t.Fatal("Allow() past the window = false, want true")
	}
}

func TestDisabledAllowsAll(t *testing.T) {
	var b Budget
	b.SetConfig(Config{Window: time.Second, Disabled: true})
	for range 100 {
		if !b.Allow(time.Unix(1, 0)) {
			t.Fatal("Allow() of a disabled budget = false")
		}
	}
}

func TestUse(t *testing.T) {
	c := Config{Ratio: 0.2, MinPerSecond: 10, Window: 10 * time.Second}
	for _, tt := range []struct {
		name           string
		c              Config
		first, retries uint64
		span           time.Duration
		want           float64
	}{
		{"half", c, 1000, 150, 10 * time.Second, 0.5}, // allows 200 + 100
		{"over", c, 0, 200, 10 * time.Second, 2},
		{"idle", c, 0, 0, time.Minute, 0},
		{"empty span", c, 0, 0, 0, 0},
		{"disabled", Config{Disabled: true, Ratio: 0.2}, 10, 10, time.Second, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Use(tt.c, tt.first, tt.retries, tt.span); got != tt.want {
				t.Errorf("Use() = %v, want %v", got, tt.want)
			}
		})
	}
}
