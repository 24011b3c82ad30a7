package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// upstream is a local HTTP server on 127.0.0.1 that answers GET /?d=NS after
// NS nanoseconds, or never with /?hang=1 (until the client gives up or the
// server closes).
type upstream struct {
	srv    *http.Server
	ln     net.Listener
	url    string
	client *http.Client
	served sync.WaitGroup
}

// startUpstream listens on a free port of 127.0.0.1; conns sizes the client's
// keep-alive pool.
func startUpstream(conns int) (*upstream, error) {
	return startServer(conns, http.HandlerFunc(serveUpstream))
}

// startServer serves h on a free port of 127.0.0.1; conns sizes the client's
// keep-alive pool.
func startServer(conns int, h http.Handler) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: upstream: %w", err)
	}
	u := &upstream{ln: ln, url: "http://" + ln.Addr().String() + "/"}
	u.srv = &http.Server{Handler: h, ReadHeaderTimeout: time.Minute}
	u.served.Go(func() { _ = u.srv.Serve(ln) })
	u.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
	}}
	return u, nil
}

func serveUpstream(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("hang") != "" {
		<-r.Context().Done()
		return
	}
	d, _ := strconv.ParseInt(r.URL.Query().Get("d"), 10, 64)
	if d > 0 {
		t := time.NewTimer(time.Duration(d))
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	_, _ = io.WriteString(w, "ok")
}

// call asks the upstream for an answer after d (never, if hang) under ctx.
func (u *upstream) call(ctx context.Context, d time.Duration, hang bool) error {
	url := u.url + "?d=" + strconv.FormatInt(int64(d), 10)
	if hang {
		url = u.url + "?hang=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return err
	}
	resp, err := u.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return errors.New("bench: upstream: " + resp.Status)
	}
	return nil
}

// close stops the server, ending the requests that still hang, and waits for it.
func (u *upstream) close() {
	_ = u.srv.Close()
	u.served.Wait()
	u.client.CloseIdleConnections()
}
