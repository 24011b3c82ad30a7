package console

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/kernel"
	"github.com/axsched/ax/store/storekit"
)

func TestStoreFigures(t *testing.T) {
	st := storekit.NewMemoryStore()
	k, err := kernel.New(kernel.Config{Store: st, Owner: "replica-1"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Kernel: k, Interval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = k.Close()
		<-h.(*console).sm.done
		_ = st.Close()
	}()
	if err := k.Register("email.send", func(context.Context, []byte) error { return nil }); err != nil {
		t.Fatal(err)
	}
	hd, err := k.SubmitDurable(context.Background(), kernel.DurableTask{Kind: "email.send", Payload: []byte(`{"secret":"hunter2"}`)})
	if err != nil {
		t.Fatal(err)
	}
	if err := hd.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := h.(*console)
	var ov overviewData
	raw, _ := json.Marshal(c.overview(nil))
	if err := json.Unmarshal(raw, &ov); err != nil {
		t.Fatal(err)
	}
	if ov.Store == nil || ov.Store.Owner != "replica-1" || ov.Store.Commits == 0 || ov.Store.Changes == 0 {
		t.Fatalf("store = %+v, want replica-1's journal with commits", ov.Store)
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(raw, &m)
	if got := keysOf(t, m["store"]); strings.Join(got, " ") != strings.Join(sortedFields("owner epoch down pending held following commits changes errors refused joins lease_lost rescued claimed prestarted adopted"), " ") {
		t.Errorf("store keys = %v", got)
	}
	b := &bundle{k: k, h: h, c: c}
	for _, path := range []string{"/", "/api/v1/overview"} {
		body := serve(t, b, path)
		if !strings.Contains(body, "replica-1") {
			t.Errorf("GET %s: no owner in %s", path, body)
		}
		if strings.Contains(body, "hunter2") {
			t.Errorf("GET %s shows a payload", path)
		}
	}
}
