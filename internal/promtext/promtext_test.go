package promtext

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/axsched/ax/internal/hist"
)

func TestAppendSample(t *testing.T) {
	for _, tt := range []struct {
		name, labels string
		want         string
	}{
		{"", "", "m 7\n"},
		{"", `a="1"`, "m{a=\"1\"} 7\n"},
	} {
		if got := string(AppendSample(nil, "m", tt.labels, 7)); got != tt.want {
			t.Errorf("AppendSample(m, %q, 7) = %q, want %q", tt.labels, got, tt.want)
		}
	}
	for _, tt := range []struct{ a, b, want string }{
		{"", "", ""}, {"a", "", "a"}, {"", "b", "b"}, {"a", "b", "a,b"},
	} {
		if got := JoinLabels(tt.a, tt.b); got != tt.want {
			t.Errorf("JoinLabels(%q, %q) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
	if NonNeg(-3) != 0 || NonNeg(4) != 4 {
		t.Errorf("NonNeg(-3), NonNeg(4) = %d, %d, want 0, 4", NonNeg(-3), NonNeg(4))
	}
}

func TestAppendHist(t *testing.T) {
	var h hist.Hist
	h.Observe(0, 500) // below the first bound (about 1 µs)
	h.Observe(0, 2*time.Millisecond)
	got := string(AppendHist(nil, &h, "w_seconds", `k="x"`))
	for _, want := range []string{
		"w_seconds_bucket{k=\"x\",le=\"1.024e-06\"} 1\n",
		"w_seconds_bucket{k=\"x\",le=\"+Inf\"} 2\n",
		"w_seconds_count{k=\"x\"} 2\n",
		"w_seconds_sum{k=\"x\"} ",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("AppendHist() = %q, want it to hold %q", got, want)
		}
	}
	if n := strings.Count(got, "_bucket{"); n != histLeMax-histLeMin+2 {
		t.Errorf("AppendHist() wrote %d buckets, want %d", n, histLeMax-histLeMin+2)
	}
}

type writer struct{ name string }

func TestJoin(t *testing.T) {
	s := metrics.NewSet()
	write := func(w io.Writer, ws []*writer) {
		for _, x := range ws {
			_, _ = io.WriteString(w, x.name+"\n")
		}
	}
	b, err := Join(s, true, "b", write)
	if err != nil {
		t.Fatalf("Join(b) = %v, want nil", err)
	}
	a, err := Join(s, true, "a", write)
	if err != nil || a != b {
		t.Fatalf("Join(a) = %p, %v, want the group of b, nil", a, err)
	}
	for _, tt := range []struct {
		name string
		want error
	}{{"a", ErrNameTaken}, {"", ErrNameRequired}} {
		if _, err := Join(s, true, tt.name, write); !errors.Is(err, tt.want) {
			t.Errorf("Join(%q) = %v, want %v", tt.name, err, tt.want)
		}
	}
	var sb strings.Builder
	s.WritePrometheus(&sb)
	if sb.String() != "" {
		t.Errorf("page before Activate = %q, want empty", sb.String())
	}
	a.Activate("b", &writer{"b"})
	a.Activate("a", &writer{"a"})
	sb.Reset()
	s.WritePrometheus(&sb)
	if got := sb.String(); got != "a\nb\n" {
		t.Errorf("page = %q, want the members in name order", got)
	}
	a.Leave("a")
	sb.Reset()
	s.WritePrometheus(&sb)
	if got := sb.String(); got != "b\n" {
		t.Errorf("page after Leave(a) = %q, want b only", got)
	}

	u := metrics.NewSet()
	if _, err := Join(u, true, "", write); err != nil {
		t.Fatalf("Join(unnamed) = %v, want nil", err)
	}
	if _, err := Join(u, true, "n", write); !errors.Is(err, ErrUnnamedMember) {
		t.Errorf("Join(n) beside an unnamed writer = %v, want ErrUnnamedMember", err)
	}

	own := metrics.NewSet()
	g, err := Join(own, false, "", write)
	if err != nil {
		t.Fatalf("Join(own set) = %v, want nil", err)
	}
	g.Activate("", &writer{"solo"})
	g.Leave("") // a set of its own keeps writing its writer
	sb.Reset()
	own.WritePrometheus(&sb)
	if got := sb.String(); got != "solo\n" {
		t.Errorf("own set's page = %q, want solo", got)
	}
}
