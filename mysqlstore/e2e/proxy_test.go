package e2e

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// proxyAction is what a sqlProxy does with a connection once a statement matched its
// rule.
type proxyAction int

const (
	// proxyPass forwards the statement and goes on.
	proxyPass proxyAction = iota
	// proxyFreeze forwards the statement, then forwards nothing more either way while
	// keeping both sides open: a process stopped mid-transaction, whose locks the server
	// keeps.
	proxyFreeze
	// proxyDropAnswer forwards the statement, then closes the client's side before the
	// server's answer reaches it: a commit whose answer is lost.
	proxyDropAnswer
)

// sqlProxy forwards TCP connections between a store's pool and the server, reading
// the client's MySQL packets so that a rule can freeze a connection, or drop its
// answer, after a given statement (COM_QUERY). While down, it refuses connections.
type sqlProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	rule  func(query string) proxyAction // nil: pass everything
	down  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

// newProxy starts a proxy to target (host:port) and closes it in t.Cleanup.
func newProxy(t *testing.T, target string) *sqlProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &sqlProxy{ln: ln, target: target}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *sqlProxy) addr() string { return p.ln.Addr().String() }

// setRule sets the rule that later statements meet: a rule fires for one statement at
// most, after which the proxy passes everything again.
func (p *sqlProxy) setRule(rule func(query string) proxyAction) {
	p.mu.Lock()
	p.rule = rule
	p.mu.Unlock()
}

// setDown makes the proxy refuse (close at once) new connections, or take them again.
func (p *sqlProxy) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *sqlProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *sqlProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		down := p.down
		p.mu.Unlock()
		if down {
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		pc := &proxyConn{p: p, client: c, server: s}
		p.wg.Add(2)
		go pc.up()
		go pc.downstream()
	}
}

// proxyConn is one forwarded connection.
type proxyConn struct {
	p              *sqlProxy
	client, server net.Conn

	mu     sync.Mutex
	frozen bool
}

// up forwards the client's packets to the server, applying the rule to each query.
func (c *proxyConn) up() {
	defer c.p.wg.Done()
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(c.client, hdr[:]); err != nil {
			c.end()
			return
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		body := make([]byte, n)
		if _, err := io.ReadFull(c.client, body); err != nil {
			c.end()
			return
		}
		act := proxyPass
		if n > 0 && body[0] == 0x03 { // COM_QUERY
			c.p.mu.Lock()
			if rule := c.p.rule; rule != nil {
				if act = rule(string(body[1:])); act != proxyPass {
					c.p.rule = nil
				}
			}
			c.p.mu.Unlock()
		}
		if c.isFrozen() {
			continue // a stopped process sends nothing; drop what its socket still gets
		}
		if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
			c.end()
			return
		}
		switch act {
		case proxyFreeze:
			c.mu.Lock()
			c.frozen = true
			c.mu.Unlock()
		case proxyDropAnswer:
			c.mu.Lock()
			c.frozen = true // the answer never reaches the client
			c.mu.Unlock()
			_ = c.client.Close()
		}
	}
}

// downstream forwards the server's bytes to the client until the connection freezes.
func (c *proxyConn) downstream() {
	defer c.p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 && !c.isFrozen() {
			if _, werr := c.client.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			if !c.isFrozen() {
				_ = c.client.Close()
			}
			return
		}
	}
}

func (c *proxyConn) isFrozen() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.frozen
}

// end closes the server's side when the client went away, unless the connection is
// frozen: a frozen connection's server side stays open (its transaction and locks
// with it) until the server kills it or the proxy closes.
func (c *proxyConn) end() {
	if !c.isFrozen() {
		_ = c.server.Close()
	}
}

// queryHas returns a rule that matches a query containing every one of parts.
func queryHas(act proxyAction, parts ...string) func(string) proxyAction {
	return func(q string) proxyAction {
		for _, p := range parts {
			if !strings.Contains(q, p) {
				return proxyPass
			}
		}
		return act
	}
}
