package metricfam

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestEveryFamilyIsNamedAndTyped(t *testing.T) {
	seen := map[string]bool{}
	for f, fam := range Families {
		if !strings.HasPrefix(fam.Name, "ax_") || fam.Help == "" || seen[fam.Name] {
			t.Errorf("family %d = %+v: want a new ax_ name and a help text", f, fam)
		}
		switch fam.Type {
		case "counter", "gauge", "histogram":
		default:
			t.Errorf("family %s: type %q", fam.Name, fam.Type)
		}
		if fam.Type == "counter" && !strings.HasSuffix(fam.Name, "_total") {
			t.Errorf("counter %s does not end in _total", fam.Name)
		}
		seen[fam.Name] = true
	}
	for f := GroupWaiting; f < Count; f++ {
		if !strings.HasPrefix(Families[f].Name, "ax_group_") {
			t.Errorf("family %s stands among the ax_group_* ones", Families[f].Name)
		}
	}
}

func TestWriteSkipsEmptyFamiliesAndKeepsOrder(t *testing.T) {
	var p Page
	p.Add(Running, `kernel="a"`, 3)
	p.Add(Submitted, `priority="high"`, 7)
	var buf bytes.Buffer
	p.Write(&buf)
	want := "# HELP ax_tasks_submitted_total " + Families[Submitted].Help + "\n" +
		"# TYPE ax_tasks_submitted_total counter\n" +
		"ax_tasks_submitted_total{priority=\"high\"} 7\n" +
		"# HELP ax_tasks_running " + Families[Running].Help + "\n" +
		"# TYPE ax_tasks_running gauge\n" +
		"ax_tasks_running{kernel=\"a\"} 3\n"
	if got := buf.String(); got != want {
		t.Fatalf("Write() =\n%s\nwant\n%s", got, want)
	}
}

func TestGroupSet(t *testing.T) {
	var s GroupSet
	b := s.Get("b")
	if s.Get("b") != b {
		t.Fatal("Get(b) twice returned two groups")
	}
	s.Get("a").Paused.Store(true)
	b.Waiting.Store(-1) // a gauge read while it moves
	b.BreakerOpened.Add(2)
	var p Page
	s.Append(&p, `kernel="k"`)
	if got := string(p[GroupPaused]); !strings.HasPrefix(got, `ax_group_paused{kernel="k",group="a"} 1`) {
		t.Fatalf("GroupPaused samples = %q, want group a first, paused", got)
	}
	if got := string(p[GroupWaiting]); !strings.Contains(got, `ax_group_waiting{kernel="k",group="b"} 0`) {
		t.Fatalf("GroupWaiting samples = %q, want b's negative gauge as 0", got)
	}
	if got := string(p[GroupBreakerTransitions]); !strings.Contains(got, `{kernel="k",group="b",to="open"} 2`) {
		t.Fatalf("GroupBreakerTransitions samples = %q, want b's 2 openings", got)
	}
	n := 0
	s.Each(func(string, *Group) { n++ })
	if n != 2 {
		t.Fatalf("Each() visited %d groups, want 2", n)
	}
}
