package e2e

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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
	// proxyDropCommit forwards the statement and arms the connection: its next COMMIT
	// is forwarded, then the client's side is closed before the server's answer
	// reaches it (a commit whose answer is lost), and the proxy goes down. A statement
	// that ends with its own COMMIT (a multi-statement query of InsertAs) loses its
	// answer so itself.
	proxyDropCommit
	// proxyCut forwards nothing of the statement: the proxy goes down at once, before
	// the statement reaches the server.
	proxyCut
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
	conns []*proxyConn
	wg    sync.WaitGroup
	// queries counts the client's commands (each a round trip), by all connections.
	queries int
	// fired is closed when a rule's action took effect: the answer to the statement
	// that froze a connection (or to the COMMIT whose answer it drops) reached the
	// proxy, or a cut happened. firedAt says when.
	fired   chan struct{}
	firedAt time.Time
}

// firing returns a channel closed once a rule's action took effect, and when it did
// (valid once the channel is closed).
func (p *sqlProxy) firing() <-chan struct{} { return p.fired }

func (p *sqlProxy) when() time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.firedAt
}

// fire records that a rule's action took effect. p.mu is held.
func (p *sqlProxy) fire() {
	select {
	case <-p.fired:
	default:
		p.firedAt = time.Now()
		close(p.fired)
	}
}

// newProxy starts a proxy to target (host:port) and closes it in t.Cleanup.
func newProxy(t *testing.T, target string) *sqlProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &sqlProxy{ln: ln, target: target, fired: make(chan struct{})}
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

// commands returns how many commands the clients sent so far.
func (p *sqlProxy) commands() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.queries
}

// goDown refuses new connections and cuts the open ones but frozen ones and except.
// p.mu is held.
func (p *sqlProxy) goDown(except *proxyConn) {
	p.down = true
	for _, c := range p.conns {
		if c != except && !c.isFrozen() {
			_ = c.client.Close()
			_ = c.server.Close()
		}
	}
}

func (p *sqlProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.client.Close()
		_ = c.server.Close()
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
		pc := &proxyConn{p: p, client: c, server: s}
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
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
	armed  bool // up only: the next COMMIT loses its answer
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
		c.p.mu.Lock()
		c.p.queries++
		if n > 0 && body[0] == 0x03 { // COM_QUERY
			q := string(body[1:])
			if c.armed && strings.EqualFold(strings.TrimSpace(q), "COMMIT") {
				c.armed, act = false, proxyDropCommit
			} else if rule := c.p.rule; rule != nil {
				if act = rule(q); act != proxyPass {
					c.p.rule = nil
				}
				if act == proxyDropCommit && !strings.HasSuffix(q, ";COMMIT") {
					// The commit is a statement of its own: arm for it. A query that
					// ends with its COMMIT (InsertAs) loses its own answer.
					c.armed, act = true, proxyPass
				}
			}
		}
		if act == proxyCut {
			c.p.goDown(nil)
			c.p.fire()
		}
		c.p.mu.Unlock()
		if act == proxyCut || c.isFrozen() {
			continue // a stopped process sends nothing; drop what its socket still gets
		}
		if act == proxyFreeze || act == proxyDropCommit {
			// Frozen before the statement leaves, so that downstream never forwards its
			// answer, however soon it comes: it fires once the answer arrives.
			c.mu.Lock()
			c.frozen = true
			c.mu.Unlock()
		}
		if _, err := c.server.Write(append(hdr[:], body...)); err != nil {
			c.end()
			return
		}
		if act == proxyDropCommit {
			_ = c.client.Close()
			c.p.mu.Lock()
			c.p.goDown(c)
			c.p.mu.Unlock()
		}
	}
}

// downstream forwards the server's bytes to the client until the connection freezes.
func (c *proxyConn) downstream() {
	defer c.p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := c.server.Read(buf)
		if n > 0 && c.isFrozen() {
			// The answer to the statement that froze the connection: the server ran it.
			c.p.mu.Lock()
			c.p.fire()
			c.p.mu.Unlock()
		} else if n > 0 {
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
